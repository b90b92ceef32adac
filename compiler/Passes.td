//===- Passes.td - tilejit's passes ----------------------------*- tablegen -*-===//
//
// One pass per file in compiler/; the order they run in is in Pipeline.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_PASSES_TD
#define TILEJIT_PASSES_TD

include "mlir/Pass/PassBase.td"

def TileVerify : Pass<"tile-verify", "mlir::ModuleOp"> {
  let summary = "Check kernel-level rules the op verifiers cannot see";
  let description = [{
    Every kernel (func.func with `tile.kernel`) has `tile.num_warps` in
    {1, 2, 4, 8, 16, 32}, returns nothing, takes only `!tile.ptr`, i32, i64 and
    f32 arguments, uses only tiles whose size is a multiple of the program's
    thread count (32 * num_warps), has `tile.cluster_size` (when present) in
    [1, 16], and uses only ops of the tile, arith, math, scf and func
    dialects. Errors name the kernel and the op.
  }];
}

def TileSpecialize : Pass<"tile-specialize", "mlir::ModuleOp"> {
  let summary = "Replace tile.constexpr with the kernel's compile-time values";
  let description = [{
    Folds each `tile.constexpr "NAME"` into an arith.constant taken from the
    kernel's `tile.constexprs` dictionary. A name missing from it is an error.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def TileSplitRows : Pass<"tile-split-rows", "mlir::ModuleOp"> {
  let summary = "Split each row of a row kernel over a thread-block cluster";
  let description = [{
    For a kernel with `tile.split_rows = C` (and tile.cluster_size = C):
    program p handles row p / C; each walk over the row (an scf.for from 0
    with a constant step B, inside no other loop) runs the slice of rank
    r = p % C, [r * per, min(ub, (r + 1) * per)) with per = ceil(ub / (C B))
    * B; what a walk carries (add, max or min reductions) is combined over
    the cluster by tile.cluster_reduce after it (a carried tile, where it is
    reduced; an online-softmax state (m, d) of tile.softmax_fold, after its
    tile.softmax_total, as M = max M_r, S = sum S_r exp(M_r - M)); stores
    outside the walks are made by rank 0 only. Sums and states start from
    their initial value on rank 0 and from the identity elsewhere. Errors: carried
    values that are not such reductions, kernels that already use clusters
    or num_programs(0), kernels without a walk.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::math::MathDialect"];
}

def TileKeepRows : Pass<"tile-keep-rows", "mlir::ModuleOp"> {
  let summary = "Keep a row in shared memory when a later walk reads it again";
  let description = [{
    For a kernel with `tile.keep_row = 1`: where a later walk over the same
    range (same bounds and step, same block) loads a tile the first walk
    loaded (same pointer, offsets %i + arange(B), mask and fill), the first
    K elements of the range are stored into a tile.shared_alloc array by the
    first walk and read from it by the later one; each walk is split at
    mid = lb + min(K, ub - lb) and reads global memory past it. K fits a
    200 KiB budget and, with `tile.row_extent`, the program's slice of such
    a row. Loads whose memory may be written between the two reads are left
    alone, except for the later walk's store of the element it just read.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def TileCopyAhead : Pass<"tile-copy-ahead", "mlir::ModuleOp"> {
  let summary = "Fill a kept row with asynchronous copies issued ahead";
  let description = [{
    For a kernel with `tile.copy_ahead = A`: in each row walk, a global
    load of the iteration's own tile whose value the body stores unchanged
    into a shared array (tile-keep-rows' first walk) becomes a copy_async
    into that array, issued A iterations ahead, one group per iteration,
    and the body reads the tile back from the array after a lane-level
    copy_wait. A tiles are then in flight without holding registers.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def TileChooseOccupancy : Pass<"tile-choose-occupancy", "mlir::ModuleOp"> {
  let summary = "Ask for as many programs per SM as a kept row's shared memory allows";
  let description = [{
    For a kernel that keeps rows in shared memory (tile.keep_row with
    tile.shared_bytes) and does not set tile.min_programs_per_sm itself:
    sets it to min(228 KiB / (shared bytes + 2 KiB), 2048 / threads,
    64 K / (40 x threads)) when that is 2 or more, so that ptxas caps the
    registers per thread at what that many programs leave. With
    `tile.programs_per_sm = n > 0` (any kernel), sets n instead.
  }];
}

def TileFuseWalks : Pass<"tile-fuse-walks", "mlir::ModuleOp"> {
  let summary = "One row walk where two read the same row";
  let description = [{
    For a kernel with `tile.fuse_walks = 1`: two row walks of one block over
    the same range and step, the first writing no memory and the second
    using none of its results, become one walk carrying both walks' values
    (the ops between them moved before or after it); a store of the second
    that may overlap a load of the first must write the element that load
    reads, in the iteration's own tile.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect"];
}

def TileUnswitch : Pass<"tile-unswitch", "mlir::ModuleOp"> {
  let summary = "One row walk per value of a condition fixed before it";
  let description = [{
    For a kernel with `tile.unswitch = 1`: a row walk whose body selects or
    branches on an i1 defined before the walk (or its splat or negation)
    becomes `scf.if %c` over two copies of the walk, %c the constant true in
    one and false in the other (at most two conditions, four copies). Walks
    that carry an online-softmax state are left alone.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::scf::SCFDialect"];
}

def TilePeelTail : Pass<"tile-peel-tail", "mlir::ModuleOp"> {
  let summary = "Run a row walk's whole tiles without their bound masks";
  let description = [{
    For a kernel with `tile.peel_tail = 1`: a row walk whose body masks its
    own tile (%i + arange(B) < X, X outside the walk) is split into a walk
    over the whole tiles below min(ub, X), where those masks are the
    constant true, and the original walk over the rest from its results
    (marked `tile.tail_walk`): at most the one partial tile when X is the
    walk's bound.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def TileLoadAhead : Pass<"tile-load-ahead", "mlir::ModuleOp"> {
  let summary = "Issue each row walk's loads one tile ahead of their use";
  let description = [{
    For a kernel with `tile.load_ahead = 1`: in each row walk, the global
    loads of the iteration's own tile (offsets %i + arange(B)) whose
    operands follow from %i alone are issued for tile %i + B at the top of
    the body (masked off past the walk's end) and carried into the next
    iteration; the first tile's loads move before the walk. The thread then
    has the next tile in flight while it computes, and across the body's
    barriers.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def TilePipelineDot : Pass<"tile-pipeline-dot", "mlir::ModuleOp"> {
  let summary = "Keep a K loop of dots over block loads whole, as tile.dot_loop";
  let description = [{
    An scf.for whose only carried value is an f32 accumulator, with step K,
    whose body is `acc' = tile.dot(tile.load_block A[a_row0, iv] (M x K),
    tile.load_block B[iv, b_col0] (K x N), acc)` and whose other load
    operands are loop-invariant, becomes one tile.dot_loop: on the GPU its
    blocks are copied into shared memory `tile.dot_stages` (default 3)
    iterations ahead and the accumulator stays in the tensor cores'
    registers. M, N, K must be powers of two of at least 16 that the
    program's warps can split into 16 x 16 blocks; the op's buffers are
    added to the kernel's `tile.shared_bytes` (fewer stages where 227 KiB
    would not hold them). Other loops are left alone.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def TileExpandLoadBlock : Pass<"tile-expand-load-block", "mlir::ModuleOp"> {
  let summary = "Write out the block loads no dot loop took as masked loads";
  let description = [{
    Each tile.load_block becomes tile.arange, the row and column of each
    element (e / C, e % C) added to the block's origin, the masked
    tile.load of row * row_stride + col * col_stride (i64) where the
    element lies in the view, and 0 elsewhere.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def TileExpandSoftmax : Pass<"tile-expand-softmax", "mlir::ModuleOp"> {
  let summary = "Write out tile.softmax_fold and tile.softmax_total";
  let description = [{
    Replaces each online-softmax op, once the row schedules have seen it,
    by arith, math and tile.reduce: fold (m, d) with x as
    m' = max(m, x), d' = x > m ? d e + 1 : d + e with
    e = x == -inf ? 0 : exp(x > m ? m - x : x - m); total as
    M = max(m), S = sum(d exp(m - (M == -inf ? 0 : M))). The exps are
    approximate (fastmath afn).
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::math::MathDialect"];
}

def TileAssignLayout : Pass<"tile-assign-layout", "mlir::ModuleOp"> {
  let summary = "Choose how tiles are spread over the threads of a program";
  let description = [{
    Sets `simt.threads` (32 * tile.num_warps) on every kernel, `simt.vec`
    (elements of the narrowest accessed type in 16 bytes) and, for row ops
    whose rows fit in a thread's group, `simt.groups`. A thread holds its
    N / threads elements of a tile in groups of adjacent elements, so its
    loads of consecutive offsets are 16-byte accesses.
  }];
}

def TileLowerToSimt : Pass<"tile-lower-to-simt", "mlir::ModuleOp"> {
  let summary = "Lower tile programs to per-thread SIMT code";
  let description = [{
    Converts tiles to per-thread vectors (tensor<N x T> -> vector<N/P x T>),
    tile.arange to the thread's own indices, tile.reduce to a thread-local
    vector.reduction followed by simt.block_reduce, tile.load/store to
    simt.load/store, tile.program_id to simt.block_id; arith/math/scf follow
    the new types. Needs tile-assign-layout first.
  }];
  let dependentDialects = ["tilejit::simt::SimtDialect",
                           "mlir::vector::VectorDialect",
                           "mlir::arith::ArithDialect"];
}

def SimtVectorizeAccess : Pass<"simt-vectorize-access", "mlir::ModuleOp"> {
  let summary = "Mark per-thread loads and stores that can be vector accesses";
  let description = [{
    For each simt.load/store with per-thread vector offsets, finds the largest
    power-of-two group g (at most 16 bytes of elements) such that within each
    aligned group of g elements the offsets are consecutive, by following the
    offsets back through broadcasts, constants, additions and extensions.
    Sets `vec = g` when g >= 2. The emitter turns each group into one vector
    access when, at run time, its address is aligned and its mask all true,
    and into per-element accesses otherwise (row ends, unaligned rows).
  }];
}

def SimtResidentPrograms : Pass<"simt-resident-programs", "mlir::ModuleOp"> {
  let summary = "Keep a GEMM's programs resident, each block running several";
  let description = [{
    For a kernel marked tile.resident with one simt.dot_loop whose views
    have tensor maps, at the top of the kernel, accumulating from zero, in
    blocks of a multiple of 128 threads and no cluster, whose A row, B
    column and K range depend only on program ids, grid sizes, kernel
    parameters and scalar arithmetic: marks the kernel simt.resident and
    the loop `resident`. Each launched block then runs programs
    blockIdx.x, blockIdx.x + gridDim.x, ... (the launch passes the grid
    after the tensor maps' mask), and the loop fills the next program's
    first blocks while the current one runs its epilogue.
  }];
}

def SimtTensorMaps : Pass<"simt-tensor-maps", "mlir::ModuleOp"> {
  let summary = "Record the tensor maps a launch builds for a dot loop's views";
  let description = [{
    For each simt.dot_loop the GPU code can run on wgmma (threads a
    multiple of 128, M a multiple of 64 per warpgroup, N 64, 128 or 256,
    K 16, 32 or 64, at most 128 accumulators per thread, M at most 256)
    whose two views each have a constant stride of 1 along one dimension
    and kernel parameters (possibly widened) or constants for their
    address, extents and other stride, over arrays the kernel does not
    store to (the copy engine would not see those stores): appends the two
    views' maps to the
    kernel's `simt.tensor_maps` and sets the op's `tensor_maps` to the
    index of the first. Each launch encodes them from its arguments and
    passes them after the kernel's own (tilejit/TensorMap.h); the GPU
    code then copies the blocks with the tensor memory accelerator.
  }];
}

def SimtClusterBarriers : Pass<"simt-cluster-barriers", "mlir::ModuleOp"> {
  let summary = "Give each cluster combine its mbarriers and slot buffers";
  let description = [{
    In a kernel of clusters of more than one program, each
    tile.cluster_reduce gets `cluster_mbarrier` (its first mbarrier in the
    kernel's array) and `cluster_buffers` (1 outside loops, 2 in a loop,
    where the next run may write while a slower program still reads: the
    mbarriers and slot buffers are used in turn), in program order; the
    kernel gets `simt.cluster_mbarriers`, the array's size.
  }];
}

#endif // TILEJIT_PASSES_TD
