//===- TileOps.td - the tile dialect ---------------------------*- tablegen -*-===//
//
// The tile dialect is what the C++ DSL builds: one program instance works on
// 1-D tiles (builtin `tensor<N x T>`, N a compile-time constant) and on uniform
// scalars. Elementwise math uses arith/math on tensors, control flow uses scf.
// Memory is reached through `!tile.ptr<T>` (a global-memory pointer) plus
// element offsets, as in Triton, but without tensors of pointers.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_TILE_OPS_TD
#define TILEJIT_TILE_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "TileBase.td"
include "TileDialect.td"

class Tile_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tile_Dialect, mnemonic, traits>;

// Element types that can live in memory and in tiles.
def Tile_Elem : AnyTypeOf<[I1, I32, I64, BF16, F16, F32]>;
def Tile_Index : AnyTypeOf<[I32, I64, 1DTensorOf<[I32, I64]>]>;
def Tile_Mask : AnyTypeOf<[I1, 1DTensorOf<[I1]>]>;
def Tile_Value : AnyTypeOf<[Tile_Elem, 1DTensorOf<[I1, I32, I64, BF16, F16, F32]>]>;

def Tile_ProgramIdOp : Tile_Op<"program_id", [Pure]> {
  let summary = "index of this program instance along a grid axis (0..2)";
  let arguments = (ins ConfinedAttr<I32Attr, [IntMinValue<0>, IntMaxValue<2>]>:$axis);
  let results = (outs I32:$result);
  let assemblyFormat = "$axis attr-dict `:` type($result)";
}

def Tile_NumProgramsOp : Tile_Op<"num_programs", [Pure]> {
  let summary = "number of program instances along a grid axis (0..2)";
  let arguments = (ins ConfinedAttr<I32Attr, [IntMinValue<0>, IntMaxValue<2>]>:$axis);
  let results = (outs I32:$result);
  let assemblyFormat = "$axis attr-dict `:` type($result)";
}

def Tile_ConstexprOp : Tile_Op<"constexpr", [Pure]> {
  let summary = "a named compile-time parameter, folded by tile-specialize";
  let description = [{
    Reads the value of compile-time parameter `name` (e.g. BLOCK_SIZE) from the
    enclosing kernel's `tile.constexprs` dictionary. Tile shapes are already
    specialized by the builder; this op keeps scalar uses symbolic in the
    printed tile IR until specialization.
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs AnyTypeOf<[I32, I64]>:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Tile_ArangeOp : Tile_Op<"arange", [Pure]> {
  let summary = "the tile [0, 1, ..., N-1]";
  let results = (outs 1DTensorOf<[I32]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tile_SplatOp : Tile_Op<"splat", [Pure]> {
  let summary = "broadcast a scalar to every element of a tile";
  let arguments = (ins Tile_Elem:$src);
  let results = (outs 1DTensorOf<[I1, I32, I64, BF16, F16, F32]>:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_AddPtrOp : Tile_Op<"addptr", [Pure, AllTypesMatch<["ptr", "result"]>]> {
  let summary = "advance a pointer by a number of elements (not bytes)";
  let arguments = (ins Tile_PtrType:$ptr, AnyTypeOf<[I32, I64]>:$offset);
  let results = (outs Tile_PtrType:$result);
  let assemblyFormat = "$ptr `,` $offset attr-dict `:` qualified(type($ptr)) `,` type($offset)";
}

def Tile_LoadOp : Tile_Op<"load", [AttrSizedOperandSegments,
                                   MemoryEffects<[MemRead]>]> {
  let summary = "masked gather of ptr[offsets]";
  let description = [{
    Loads `ptr[offsets]` (element offsets, scalar or tile). Where `mask` is
    false the memory is not touched and the result is `other` (zero when
    absent). The result has the pointer's element type and the offsets' shape.
  }];
  let arguments = (ins Tile_PtrType:$ptr, Tile_Index:$offsets,
                   Optional<Tile_Mask>:$mask, Optional<Tile_Elem>:$other);
  let results = (outs Tile_Value:$result);
  let assemblyFormat = [{
    $ptr `[` $offsets `]` (`mask` $mask^)? (`other` $other^)? attr-dict `:`
    qualified(type($ptr)) `[` type($offsets) `]` (`mask` type($mask)^)?
    (`other` type($other)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tile_StoreOp : Tile_Op<"store", [MemoryEffects<[MemWrite]>]> {
  let summary = "masked scatter of value into ptr[offsets]";
  let arguments = (ins Tile_PtrType:$ptr, Tile_Index:$offsets, Tile_Value:$value,
                   Optional<Tile_Mask>:$mask);
  let assemblyFormat = [{
    $ptr `[` $offsets `]` `,` $value (`mask` $mask^)? attr-dict `:`
    qualified(type($ptr)) `[` type($offsets) `]` `,` type($value)
    (`mask` type($mask)^)?
  }];
  let hasVerifier = 1;
}

def Tile_ReduceOp : Tile_Op<"reduce", [Pure]> {
  let summary = "reduce a 1-D tile to a scalar";
  let arguments = (ins ReduceKind:$kind,
                   1DTensorOf<[I32, I64, F32]>:$src);
  let results = (outs AnyTypeOf<[I32, I64, F32]>:$result);
  let assemblyFormat = "$kind $src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_SoftmaxFoldOp : Tile_Op<"softmax_fold", [Pure,
    AllTypesMatch<["m", "d", "x", "m_next", "d_next"]>]> {
  let summary = "fold a tile into a per-lane online-softmax state (m, d)";
  let description = [{
    Per lane: m' = max(m, x) and d' = d exp(m - m') + exp(x - m'), with one
    exp per element (the smaller of m and x is the one rescaled) and
    exp(-inf - m') = 0. A state starts at (-inf, 0). The compiler knows
    the state for what it is (a row split over a cluster combines the
    programs' states on chip); tile-expand-softmax lowers it to arith and
    math.
  }];
  let arguments = (ins 1DTensorOf<[F32]>:$m, 1DTensorOf<[F32]>:$d,
                   1DTensorOf<[F32]>:$x);
  let results = (outs 1DTensorOf<[F32]>:$m_next, 1DTensorOf<[F32]>:$d_next);
  let assemblyFormat = "$m `,` $d `,` $x attr-dict `:` type($m)";
}

def Tile_SoftmaxTotalOp : Tile_Op<"softmax_total", [Pure,
    AllTypesMatch<["m", "d"]>]> {
  let summary = "a per-lane online-softmax state's row max and sum";
  let description = [{
    M = max over lanes of m, S = sum over lanes of d exp(m - M') with
    M' = M, or 0 when M = -inf (an empty row: S = 0). S is the row's
    sum-exp against its max: lse = M' + log S.
  }];
  let arguments = (ins 1DTensorOf<[F32]>:$m, 1DTensorOf<[F32]>:$d);
  let results = (outs F32:$max, F32:$sum);
  let assemblyFormat = "$m `,` $d attr-dict `:` type($m)";
}

def Tile_DotOp : Tile_Op<"dot", [Pure]> {
  let summary = "matrix product of row-major tiles, on tensor cores";
  let description = [{
    `a` holds an M x K matrix and `b` a K x N matrix, row-major (element
    (i, j) of an R x C matrix is tile element i * C + j); the result is
    acc + a b (M x N, f32), each product exact and the sums in f32. M and K
    are multiples of 16, N of 8 (mma.sync m16n8k16 on the GPU).
  }];
  let arguments = (ins 1DTensorOf<[BF16, F16]>:$a, 1DTensorOf<[BF16, F16]>:$b,
                   1DTensorOf<[F32]>:$acc, I64Attr:$m, I64Attr:$n, I64Attr:$k);
  let results = (outs 1DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $a `,` $b `,` $acc attr-dict `:` type($a) `,` type($b) `,` type($acc)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tile_LoadBlockOp : Tile_Op<"load_block", [MemoryEffects<[MemRead]>]> {
  let summary = "an R x C block of a 2-D view of memory, zeros outside the view";
  let description = [{
    The view has `rows` x `cols` elements, element (r, c) at
    `ptr[r * row_stride + c * col_stride]` (strides in elements, either may
    be 1: a transposed matrix is the same memory with the strides swapped).
    Element (i, j) of the result (tile element i * C + j, C = `block_cols`)
    is element (row0 + i, col0 + j) of the view, or 0 where that lies
    outside [0, rows) x [0, cols), as Triton's tensor descriptors load.
  }];
  let arguments = (ins Tile_PtrType:$ptr, I64:$rows, I64:$cols,
                   I64:$row_stride, I64:$col_stride, I64:$row0, I64:$col0,
                   ConfinedAttr<I64Attr, [IntPositive]>:$block_rows,
                   ConfinedAttr<I64Attr, [IntPositive]>:$block_cols);
  let results = (outs 1DTensorOf<[I32, I64, BF16, F16, F32]>:$result);
  let assemblyFormat = [{
    $ptr `[` $row0 `,` $col0 `]` `of` `[` $rows `,` $cols `]` `strides`
    `[` $row_stride `,` $col_stride `]` attr-dict `:` qualified(type($ptr))
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tile_DotLoopOp : Tile_Op<"dot_loop", [MemoryEffects<[MemRead]>]> {
  let summary = "a K loop of tile.dot over blocks of two 2-D views, as one op";
  let description = [{
    The result is `acc` plus, for kk = k_begin, k_begin + k, ... below
    k_end, the product of the M x K block of view A at (a_row0, kk) and
    the K x N block of view B at (kk, b_col0), each read as
    tile.load_block reads it (zeros outside the view) and multiplied as
    tile.dot multiplies: the loop tile-pipeline-dot finds, kept whole so
    that the GPU code can stage the blocks through shared memory ahead of
    their use (`stages` blocks in flight) and keep the accumulator in the
    tensor cores' registers. `smem_offset` is the byte offset of its
    buffers in the kernel's dynamic shared memory.
  }];
  let arguments = (ins Tile_PtrType:$a, I64:$a_rows, I64:$a_cols,
                   I64:$a_row_stride, I64:$a_col_stride, I64:$a_row0,
                   Tile_PtrType:$b, I64:$b_rows, I64:$b_cols,
                   I64:$b_row_stride, I64:$b_col_stride, I64:$b_col0,
                   I64:$k_begin, I64:$k_end, 1DTensorOf<[F32]>:$acc,
                   I64Attr:$m, I64Attr:$n, I64Attr:$k,
                   ConfinedAttr<I64Attr, [IntMinValue<2>, IntMaxValue<8>]>:$stages,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$smem_offset);
  let results = (outs 1DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $a `[` $a_row0 `,` `k` `]` `of` `[` $a_rows `,` $a_cols `]` `strides`
    `[` $a_row_stride `,` $a_col_stride `]` `times`
    $b `[` `k` `,` $b_col0 `]` `of` `[` $b_rows `,` $b_cols `]` `strides`
    `[` $b_row_stride `,` $b_col_stride `]` `over` `[` $k_begin `,` $k_end `)`
    `plus` $acc attr-dict `:` qualified(type($a)) `,` qualified(type($b)) `,`
    type($acc) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tile_ReduceRowsOp : Tile_Op<"reduce_rows", [Pure]> {
  let summary = "reduce each row of a row-major tile";
  let description = [{
    `src` holds an R x `cols` matrix, row-major; the result holds the R row
    reductions, each combining its row in column order.
  }];
  let arguments = (ins ReduceKind:$kind, 1DTensorOf<[I32, I64, F32]>:$src,
                   I64Attr:$cols);
  let results = (outs 1DTensorOf<[I32, I64, F32]>:$result);
  let assemblyFormat = "$kind $src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_BroadcastRowsOp : Tile_Op<"broadcast_rows", [Pure]> {
  let summary = "repeat each element `cols` times: a column to a matrix";
  let description = [{
    The result holds the R x `cols` row-major matrix whose row i is `cols`
    copies of src[i].
  }];
  let arguments = (ins 1DTensorOf<[I1, I32, I64, BF16, F16, F32]>:$src,
                   I64Attr:$cols);
  let results = (outs 1DTensorOf<[I1, I32, I64, BF16, F16, F32]>:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_ClusterReduceOp : Tile_Op<"cluster_reduce"> {
  let summary = "combine scalars across the programs of a thread-block cluster";
  let description = [{
    The kernel's `tile.cluster_size` consecutive programs along axis 0 form
    a cluster (CUDA thread-block clusters on sm_90: one row can be split over
    several programs and still be reduced on chip). Each operand is combined
    over the programs of the cluster in program order, so every program gets
    bit-identical results. Every program of the cluster must reach the op
    (each waits for the values of all the others); operands must be uniform
    in a program. The CUDA code pushes the values to every program's
    mbarrier (st.async) and needs no cluster barrier of its own (one at the
    kernel's start covers the mbarriers' setup); in a loop each op uses two
    slot buffers and two mbarriers in turn, with a block barrier before
    each push.
  }];
  let arguments = (ins ReduceKind:$kind, Variadic<AnyTypeOf<[I32, I64, F32]>>:$srcs);
  let results = (outs Variadic<AnyTypeOf<[I32, I64, F32]>>:$results);
  let assemblyFormat = "$kind $srcs attr-dict `:` type($srcs) `->` type($results)";
  let hasVerifier = 1;
}

def Tile_SharedAllocOp : Tile_Op<"shared_alloc"> {
  let summary = "a program's array in shared memory (on chip)";
  let description = [{
    `size` elements of the pointer's element type, private to the program
    (a CUDA block), at byte `offset` of the kernel's dynamic shared memory
    (the kernel's `tile.shared_bytes` covers every array). Reached with
    tile.load / tile.store like global memory; a program sees its own
    writes after a tile.barrier (or at once, lane by lane, when each lane
    reads back what it wrote). Only in the kernel's top-level block, so one
    allocation lives for the whole program.
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntPositive]>:$size,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$offset);
  let results = (outs Tile_PtrType:$result);
  let assemblyFormat = "attr-dict `:` qualified(type($result))";
  let hasVerifier = 1;
}

def Tile_BarrierOp : Tile_Op<"barrier"> {
  let summary = "all lanes of the program meet; shared-memory writes before it are seen after it";
  let description = [{
    A CUDA __syncthreads(): every lane of the program must reach it, so use
    it under conditions that are uniform in the program only.
  }];
  let assemblyFormat = "attr-dict";
}

def Tile_CopyAsyncOp : Tile_Op<"copy_async", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "start copying src[src_offsets] into dst[dst_offsets], lane by lane";
  let description = [{
    An asynchronous gather-to-shared-memory copy (cp.async on sm_80+): the
    copy is only guaranteed done after a tile.copy_commit that closes its
    group and a tile.copy_wait that waits for that group. Where `mask` is
    false nothing is copied. `dst` is meant to be a tile.shared_alloc array;
    both pointers have one element type.
  }];
  let arguments = (ins Tile_PtrType:$dst, Tile_Index:$dst_offsets,
                   Tile_PtrType:$src, Tile_Index:$src_offsets,
                   Optional<Tile_Mask>:$mask);
  let assemblyFormat = [{
    $dst `[` $dst_offsets `]` `,` $src `[` $src_offsets `]` (`mask` $mask^)?
    attr-dict `:` qualified(type($dst)) `[` type($dst_offsets) `]` `,`
    qualified(type($src)) `[` type($src_offsets) `]` (`mask` type($mask)^)?
  }];
  let hasVerifier = 1;
}

def Tile_CopyCommitOp : Tile_Op<"copy_commit"> {
  let summary = "close the group of tile.copy_async started since the last commit";
  let assemblyFormat = "attr-dict";
}

def Tile_CopyWaitOp : Tile_Op<"copy_wait"> {
  let summary = "wait until at most `pending` committed copy groups are in flight, then a barrier";
  let description = [{
    After it, every lane of the program sees the data of every completed
    group (it ends with a tile.barrier, so use it under conditions that are
    uniform in the program only). With `lane_only` there is no barrier:
    each lane sees what its own copies wrote, which is enough where every
    lane reads back only the elements it copied (the load's offset at each
    tile index equal to the copy's destination offset there).
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntNonNegative, IntMaxValue<7>]>:$pending,
                       UnitAttr:$lane_only);
  let assemblyFormat = "attr-dict";
}

def Tile_PrefetchL2Op : Tile_Op<"prefetch_l2"> {
  let summary = "hint: bring ptr[offset, offset + count) into L2";
  let description = [{
    One lane of the program asks the copy engine to bring the elements
    into L2 (cp.async.bulk.prefetch.L2 on sm_90; nothing before), so that
    loads of them soon after hit there. It holds no registers and changes
    no value. Only the whole 16-byte units inside the range are fetched; a
    count <= 0 fetches nothing. The range must lie inside the buffer (the
    CPU interpreter checks that).
  }];
  let arguments = (ins Tile_PtrType:$ptr, AnyTypeOf<[I32, I64]>:$offset,
                       AnyTypeOf<[I32, I64]>:$count);
  let assemblyFormat = [{
    $ptr `[` $offset `,` $count `]` attr-dict `:` qualified(type($ptr)) `,`
    type($offset) `,` type($count)
  }];
}

#endif // TILEJIT_TILE_OPS_TD
