//===- ExpectError.h - a tilejit::Error with the expected message -*- C++ -*-===//
#ifndef TILEJIT_TESTS_UNIT_EXPECTERROR_H
#define TILEJIT_TESTS_UNIT_EXPECTERROR_H

#include "tilejit/Error.h"

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>

/// Expects `fn` to throw a tilejit::Error whose message has every `parts`.
inline void expectError(const std::function<void()> &fn,
                        std::initializer_list<const char *> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected a tilejit::Error";
  } catch (const ::tilejit::Error &e) {
    for (const char *p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << p << "' not in: " << e.what();
  }
}

#endif // TILEJIT_TESTS_UNIT_EXPECTERROR_H
