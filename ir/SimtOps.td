//===- SimtOps.td - the simt dialect ---------------------------*- tablegen -*-===//
//
// Per-thread code after layout assignment: a tile `tensor<N x T>` of a program
// with P threads becomes `vector<N/P x T>` in each thread (thread t owns the
// contiguous elements [t*N/P, (t+1)*N/P)). Scalars stay uniform. Cross-thread
// communication is explicit (simt.block_reduce: warp shuffles, then shared
// memory across warps). The CUDA emitter prints this level.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_SIMT_OPS_TD
#define TILEJIT_SIMT_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinTypes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "TileBase.td"
include "TileDialect.td"

def Simt_Dialect : Dialect {
  let name = "simt";
  let cppNamespace = "::tilejit::simt";
  let summary = "Per-thread (SIMT) code with explicit cross-thread operations";
  let dependentDialects = ["::tilejit::tile::TileDialect"];
}

class Simt_Op<string mnemonic, list<Trait> traits = []>
    : Op<Simt_Dialect, mnemonic, traits>;

def Simt_Elem : AnyTypeOf<[I1, I32, I64, BF16, F16, F32]>;
def Simt_Index : AnyTypeOf<[I32, I64, VectorOfRankAndType<[1], [I32, I64]>]>;
def Simt_Mask : AnyTypeOf<[I1, VectorOfRankAndType<[1], [I1]>]>;
def Simt_Value : AnyTypeOf<[Simt_Elem, VectorOfRankAndType<[1], [I1, I32, I64, BF16, F16, F32]>]>;

def Simt_ThreadIdOp : Simt_Op<"thread_id", [Pure]> {
  let summary = "index of this thread in its block (threadIdx.x)";
  let results = (outs I32:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Simt_BlockIdOp : Simt_Op<"block_id", [Pure]> {
  let summary = "index of this block along a grid axis (blockIdx)";
  let arguments = (ins ConfinedAttr<I32Attr, [IntMinValue<0>, IntMaxValue<2>]>:$axis);
  let results = (outs I32:$result);
  let assemblyFormat = "$axis attr-dict `:` type($result)";
}

def Simt_GridDimOp : Simt_Op<"grid_dim", [Pure]> {
  let summary = "number of blocks along a grid axis (gridDim)";
  let arguments = (ins ConfinedAttr<I32Attr, [IntMinValue<0>, IntMaxValue<2>]>:$axis);
  let results = (outs I32:$result);
  let assemblyFormat = "$axis attr-dict `:` type($result)";
}

def Simt_BlockReduceOp : Simt_Op<"block_reduce", [AllTypesMatch<["src", "result"]>]> {
  let summary = "combine one scalar per thread across the block; all threads get the result";
  let description = [{
    Lowered to warp shuffles (butterfly) and, with more than one warp, a
    shared-memory exchange between warps with barriers. Every thread of the
    block must reach it (it is a barrier).
  }];
  let arguments = (ins ReduceKind:$kind, AnyTypeOf<[I32, I64, F32]>:$src);
  let results = (outs AnyTypeOf<[I32, I64, F32]>:$result);
  let assemblyFormat = "$kind $src attr-dict `:` type($src)";
}

def Simt_DotOp : Simt_Op<"dot"> {
  let summary = "tile.dot on per-thread elements (staged in shared memory)";
  let description = [{
    Operands and result are the thread's elements of tile.dot's tiles (in
    the kernel's layout). Every thread of the block must reach it: it is a
    barrier.
  }];
  let arguments = (ins VectorOfRankAndType<[1], [BF16, F16]>:$a,
                   VectorOfRankAndType<[1], [BF16, F16]>:$b,
                   VectorOfRankAndType<[1], [F32]>:$acc,
                   I64Attr:$m, I64Attr:$n, I64Attr:$k);
  let results = (outs VectorOfRankAndType<[1], [F32]>:$result);
  let assemblyFormat = [{
    $a `,` $b `,` $acc attr-dict `:` type($a) `,` type($b) `,` type($acc)
    `->` type($result)
  }];
}

def Simt_DotLoopOp : Simt_Op<"dot_loop", [MemoryEffects<[MemRead]>]> {
  let summary = "tile.dot_loop on per-thread elements (a pipelined tensor-core main loop)";
  let description = [{
    Operands and attributes as tile.dot_loop's; `acc` and the result are
    the thread's elements of its tiles (in the kernel's layout). Every
    thread of the block must reach it: it is a barrier. `tensor_maps`
    (simt-tensor-maps): the index, in the kernel's `simt.tensor_maps`, of
    the map of A's view; B's is the next one. `resident`
    (simt-resident-programs): the kernel's programs run in turn in each
    block, and the loop fills the next program's first blocks while this
    one finishes.
  }];
  let arguments = (ins Tile_PtrType:$a, I64:$a_rows, I64:$a_cols,
                   I64:$a_row_stride, I64:$a_col_stride, I64:$a_row0,
                   Tile_PtrType:$b, I64:$b_rows, I64:$b_cols,
                   I64:$b_row_stride, I64:$b_col_stride, I64:$b_col0,
                   I64:$k_begin, I64:$k_end,
                   VectorOfRankAndType<[1], [F32]>:$acc,
                   I64Attr:$m, I64Attr:$n, I64Attr:$k, I64Attr:$stages,
                   I64Attr:$smem_offset,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$tensor_maps,
                   UnitAttr:$resident);
  let results = (outs VectorOfRankAndType<[1], [F32]>:$result);
  let assemblyFormat = [{
    $a `[` $a_row0 `,` `k` `]` `of` `[` $a_rows `,` $a_cols `]` `strides`
    `[` $a_row_stride `,` $a_col_stride `]` `times`
    $b `[` `k` `,` $b_col0 `]` `of` `[` $b_rows `,` $b_cols `]` `strides`
    `[` $b_row_stride `,` $b_col_stride `]` `over` `[` $k_begin `,` $k_end `)`
    `plus` $acc attr-dict `:` qualified(type($a)) `,` qualified(type($b)) `,`
    type($acc) `->` type($result)
  }];
}

def Simt_ReduceRowsOp : Simt_Op<"reduce_rows"> {
  let summary = "tile.reduce_rows on per-thread elements (via shared memory)";
  let arguments = (ins ReduceKind:$kind,
                   VectorOfRankAndType<[1], [I32, I64, F32]>:$src,
                   I64Attr:$cols);
  let results = (outs VectorOfRankAndType<[1], [I32, I64, F32]>:$result);
  let assemblyFormat = "$kind $src attr-dict `:` type($src) `->` type($result)";
}

def Simt_BroadcastRowsOp : Simt_Op<"broadcast_rows"> {
  let summary = "tile.broadcast_rows on per-thread elements (via shared memory)";
  let arguments = (ins VectorOfRankAndType<[1], [I1, I32, I64, BF16, F16, F32]>:$src,
                   I64Attr:$cols);
  let results = (outs VectorOfRankAndType<[1], [I1, I32, I64, BF16, F16, F32]>:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
}

def Simt_LoadOp : Simt_Op<"load", [AttrSizedOperandSegments,
                                   MemoryEffects<[MemRead]>]> {
  let summary = "per-thread masked load of ptr[offsets]";
  let arguments = (ins Tile_PtrType:$ptr, Simt_Index:$offsets,
                   Optional<Simt_Mask>:$mask, Optional<Simt_Elem>:$other);
  let results = (outs Simt_Value:$result);
  let assemblyFormat = [{
    $ptr `[` $offsets `]` (`mask` $mask^)? (`other` $other^)? attr-dict `:`
    qualified(type($ptr)) `[` type($offsets) `]` (`mask` type($mask)^)?
    (`other` type($other)^)? `->` type($result)
  }];
}

def Simt_StoreOp : Simt_Op<"store", [MemoryEffects<[MemWrite]>]> {
  let summary = "per-thread masked store into ptr[offsets]";
  let arguments = (ins Tile_PtrType:$ptr, Simt_Index:$offsets, Simt_Value:$value,
                   Optional<Simt_Mask>:$mask);
  let assemblyFormat = [{
    $ptr `[` $offsets `]` `,` $value (`mask` $mask^)? attr-dict `:`
    qualified(type($ptr)) `[` type($offsets) `]` `,` type($value)
    (`mask` type($mask)^)?
  }];
}

def Simt_CopyAsyncOp : Simt_Op<"copy_async", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "per-thread tile.copy_async on the thread's own offsets and mask";
  let arguments = (ins Tile_PtrType:$dst, Simt_Index:$dst_offsets,
                   Tile_PtrType:$src, Simt_Index:$src_offsets,
                   Optional<Simt_Mask>:$mask);
  let assemblyFormat = [{
    $dst `[` $dst_offsets `]` `,` $src `[` $src_offsets `]` (`mask` $mask^)?
    attr-dict `:` qualified(type($dst)) `[` type($dst_offsets) `]` `,`
    qualified(type($src)) `[` type($src_offsets) `]` (`mask` type($mask)^)?
  }];
}

#endif // TILEJIT_SIMT_OPS_TD
