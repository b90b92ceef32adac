//===- TileDialect.td - the tile dialect and its pointer type -*- tablegen -*-===//
#ifndef TILEJIT_TILE_DIALECT_TD
#define TILEJIT_TILE_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Tile_Dialect : Dialect {
  let name = "tile";
  let cppNamespace = "::tilejit::tile";
  let summary = "Tile-level programs: one program instance over 1-D tiles";
  let useDefaultTypePrinterParser = 1;
}

def Tile_PtrType : TypeDef<Tile_Dialect, "Ptr"> {
  let mnemonic = "ptr";
  let summary = "pointer to elements of one type in global or shared memory";
  let parameters = (ins "::mlir::Type":$elementType);
  let assemblyFormat = "`<` $elementType `>`";
}

#endif // TILEJIT_TILE_DIALECT_TD
