# Writes the text of IN into OUT as one C++ raw string literal, for a source
# file to #include where it needs the text (-DIN=... -DOUT=...).
file(READ "${IN}" text)
file(WRITE "${OUT}" "R\"tjcuh(${text})tjcuh\"\n")
