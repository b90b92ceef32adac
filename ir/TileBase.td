//===- TileBase.td - pieces shared by the tile and simt dialects -*- tablegen -*-===//
#ifndef TILEJIT_TILE_BASE_TD
#define TILEJIT_TILE_BASE_TD

include "mlir/IR/EnumAttr.td"

// The combining function of a reduction (tile.reduce, simt.block_reduce).
def ReduceKind : I32EnumAttr<"ReduceKind", "reduction combiner", [
    I32EnumAttrCase<"Sum", 0, "sum">,
    I32EnumAttrCase<"Max", 1, "max">,
    I32EnumAttrCase<"Min", 2, "min">]> {
  let cppNamespace = "::tilejit";
}

#endif // TILEJIT_TILE_BASE_TD
