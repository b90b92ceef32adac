// RUN: tilejit-opt %s --tile-assign-layout --tile-lower-to-simt --canonicalize --cse | FileCheck %s
// RUN: not tilejit-opt %s --tile-lower-to-simt --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=NOLAYOUT

// Without tile-assign-layout the first kernel has no thread count.
// NOLAYOUT: error: 'func.func' op kernel 'arange_store' has no valid 'simt.threads' attribute; run tile-assign-layout first

// Blocked layout: 4 warps = 128 threads, a 512-tile is 4 elements per thread.
// CHECK-LABEL: func.func @arange_store(
// CHECK-SAME:      simt.threads = 128 : i64
// CHECK-DAG:     %[[IOTA:.*]] = arith.constant dense<[0, 1, 2, 3]> : vector<4xi32>
// CHECK-DAG:     %[[K:.*]] = arith.constant 4 : i32
// CHECK:         %[[TID:.*]] = simt.thread_id : i32
// CHECK:         %[[BASE:.*]] = arith.muli %[[TID]], %[[K]] : i32
// CHECK:         %[[BV:.*]] = vector.broadcast %[[BASE]] : i32 to vector<4xi32>
// CHECK:         %[[IDX:.*]] = arith.addi %[[BV]], %[[IOTA]] : vector<4xi32>
// CHECK:         simt.store %arg0[%[[IDX]]], %[[IDX]] : !tile.ptr<i32>[vector<4xi32>], vector<4xi32>
// CHECK-NOT:     tile.
// CHECK:         return
func.func @arange_store(%out: !tile.ptr<i32>) attributes {tile.kernel, tile.num_warps = 4 : i64} {
  %a = tile.arange : tensor<512xi32>
  tile.store %out[%a], %a : !tile.ptr<i32>[tensor<512xi32>], tensor<512xi32>
  return
}

// CHECK-LABEL: func.func @masked_load(
// CHECK-DAG:     %[[NINF:.*]] = arith.constant 0xFF80 : bf16
// CHECK:         %[[PID:.*]] = simt.block_id 0 : i32
// CHECK:         %[[NP:.*]] = simt.grid_dim 0 : i32
// CHECK:         %[[OFF:.*]] = arith.muli %[[PID]], %[[NP]] : i32
// CHECK:         %[[P:.*]] = tile.addptr %arg0, %[[OFF]] : !tile.ptr<bf16>, i32
// CHECK:         %[[IDX:.*]] = arith.addi {{.*}} : vector<4xi32>
// CHECK:         %[[NS:.*]] = vector.broadcast %arg2 : i32 to vector<4xi32>
// CHECK:         %[[MASK:.*]] = arith.cmpi slt, %[[IDX]], %[[NS]] : vector<4xi32>
// CHECK:         %[[V:.*]] = simt.load %[[P]][%[[IDX]]] mask %[[MASK]] other %[[NINF]] : !tile.ptr<bf16>[vector<4xi32>] mask vector<4xi1> other bf16 -> vector<4xbf16>
// CHECK:         simt.store %arg1[%[[IDX]]], %[[V]] mask %[[MASK]] : !tile.ptr<bf16>[vector<4xi32>], vector<4xbf16> mask vector<4xi1>
func.func @masked_load(%x: !tile.ptr<bf16>, %y: !tile.ptr<bf16>, %n: i32) attributes {tile.kernel, tile.num_warps = 4 : i64} {
  %pid = tile.program_id 0 : i32
  %np = tile.num_programs 0 : i32
  %base = arith.muli %pid, %np : i32
  %p = tile.addptr %x, %base : !tile.ptr<bf16>, i32
  %a = tile.arange : tensor<512xi32>
  %ns = tile.splat %n : i32 -> tensor<512xi32>
  %mask = arith.cmpi slt, %a, %ns : tensor<512xi32>
  %ninf = arith.constant 0xFF80 : bf16
  %v = tile.load %p[%a] mask %mask other %ninf : !tile.ptr<bf16>[tensor<512xi32>] mask tensor<512xi1> other bf16 -> tensor<512xbf16>
  tile.store %y[%a], %v mask %mask : !tile.ptr<bf16>[tensor<512xi32>], tensor<512xbf16> mask tensor<512xi1>
  return
}

// CHECK-LABEL: func.func @reduce(
// CHECK-SAME:      simt.threads = 256 : i64
// CHECK:         %[[V:.*]] = simt.load %arg0[%{{.*}}] : !tile.ptr<f32>[vector<4xi32>] -> vector<4xf32>
// CHECK:         %[[LS:.*]] = vector.reduction <add>, %[[V]] : vector<4xf32> into f32
// CHECK:         %[[S:.*]] = simt.block_reduce sum %[[LS]] : f32
// CHECK:         %[[LM:.*]] = vector.reduction <maximumf>, %[[V]] : vector<4xf32> into f32
// CHECK:         %[[M:.*]] = simt.block_reduce max %[[LM]] : f32
// CHECK:         %[[R:.*]] = arith.subf %[[S]], %[[M]] : f32
// CHECK:         %[[PID:.*]] = simt.block_id 0 : i32
// CHECK:         simt.store %arg1[%[[PID]]], %[[R]] : !tile.ptr<f32>[i32], f32
func.func @reduce(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 8 : i64} {
  %a = tile.arange : tensor<1024xi32>
  %v = tile.load %x[%a] : !tile.ptr<f32>[tensor<1024xi32>] -> tensor<1024xf32>
  %s = tile.reduce sum %v : tensor<1024xf32> -> f32
  %m = tile.reduce max %v : tensor<1024xf32> -> f32
  %r = arith.subf %s, %m : f32
  %pid = tile.program_id 0 : i32
  tile.store %out[%pid], %r : !tile.ptr<f32>[i32], f32
  return
}

// CHECK-LABEL: func.func @loop(
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : i32
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : i32
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<4xf32>
// CHECK:         %[[IDX:.*]] = arith.addi {{.*}} : vector<4xi32>
// CHECK:         %[[R:.*]]:2 = scf.for %{{.*}} = %[[C0]] to %arg3 step %[[C1]] iter_args(%[[ACC:[^ ]+]] = %[[ZERO]], %[[CNT:[^ ]+]] = %[[C0]]) -> (vector<4xf32>, i32) : i32 {
// CHECK:           %[[V:.*]] = simt.load %arg0[%[[IDX]]] : !tile.ptr<f32>[vector<4xi32>] -> vector<4xf32>
// CHECK:           %[[W:.*]] = arith.addf %[[ACC]], %[[V]] fastmath<contract> : vector<4xf32>
// CHECK:           %[[N:.*]] = arith.addi %[[CNT]], %[[C1]] : i32
// CHECK:           scf.yield %[[W]], %[[N]] : vector<4xf32>, i32
// CHECK:         }
// CHECK:         simt.store %arg1[%[[IDX]]], %[[R]]#0 : !tile.ptr<f32>[vector<4xi32>], vector<4xf32>
// CHECK:         simt.store %arg2[%[[C0]]], %[[R]]#1 : !tile.ptr<i32>[i32], i32
func.func @loop(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>, %cnt_out: !tile.ptr<i32>, %n: i32) attributes {tile.kernel, tile.num_warps = 2 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<256xf32>
  %a = tile.arange : tensor<256xi32>
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero, %cnt = %c0) -> (tensor<256xf32>, i32) : i32 {
    %v = tile.load %x[%a] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %w = arith.addf %acc, %v fastmath<contract> : tensor<256xf32>
    %c = arith.addi %cnt, %c1 : i32
    scf.yield %w, %c : tensor<256xf32>, i32
  }
  tile.store %out[%a], %r#0 : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  tile.store %cnt_out[%c0], %r#1 : !tile.ptr<i32>[i32], i32
  return
}

// CHECK-LABEL: func.func @branch(
// CHECK-SAME:      simt.threads = 32 : i64
// CHECK:         %[[V:.*]] = simt.load %arg0[%{{.*}}] : !tile.ptr<f32>[vector<2xi32>] -> vector<2xf32>
// CHECK:         %[[T:.*]] = scf.if %{{.*}} -> (vector<2xf32>) {
// CHECK:           %[[E:.*]] = math.exp %[[V]] : vector<2xf32>
// CHECK:           scf.yield %[[E]] : vector<2xf32>
// CHECK:         } else {
// CHECK:           scf.yield %[[V]] : vector<2xf32>
// CHECK:         }
// CHECK:         simt.store %arg0[%{{.*}}], %[[T]] : !tile.ptr<f32>[vector<2xi32>], vector<2xf32>
func.func @branch(%x: !tile.ptr<f32>, %flag: i32) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %a = tile.arange : tensor<64xi32>
  %v = tile.load %x[%a] : !tile.ptr<f32>[tensor<64xi32>] -> tensor<64xf32>
  %cond = arith.cmpi ne, %flag, %c0 : i32
  %t = scf.if %cond -> (tensor<64xf32>) {
    %e = math.exp %v : tensor<64xf32>
    scf.yield %e : tensor<64xf32>
  } else {
    scf.yield %v : tensor<64xf32>
  }
  tile.store %x[%a], %t : !tile.ptr<f32>[tensor<64xi32>], tensor<64xf32>
  return
}

// CHECK-LABEL: func.func @convert_select(
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<4xf32>
// CHECK:         %[[V:.*]] = simt.load %arg0[%{{.*}}] : !tile.ptr<bf16>[vector<4xi32>] -> vector<4xbf16>
// CHECK:         %[[F:.*]] = arith.extf %[[V]] : vector<4xbf16> to vector<4xf32>
// CHECK:         %[[NEG:.*]] = arith.cmpf olt, %[[F]], %[[ZERO]] : vector<4xf32>
// CHECK:         %[[NF:.*]] = arith.negf %[[F]] : vector<4xf32>
// CHECK:         %[[ABS:.*]] = arith.select %[[NEG]], %[[NF]], %[[F]] : vector<4xi1>, vector<4xf32>
// CHECK:         %[[B:.*]] = arith.truncf %[[ABS]] : vector<4xf32> to vector<4xbf16>
// CHECK:         simt.store %arg1[%{{.*}}], %[[B]] : !tile.ptr<bf16>[vector<4xi32>], vector<4xbf16>
func.func @convert_select(%x: !tile.ptr<bf16>, %y: !tile.ptr<bf16>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  %a = tile.arange : tensor<128xi32>
  %v = tile.load %x[%a] : !tile.ptr<bf16>[tensor<128xi32>] -> tensor<128xbf16>
  %f = arith.extf %v : tensor<128xbf16> to tensor<128xf32>
  %zero = arith.constant dense<0.0> : tensor<128xf32>
  %neg = arith.cmpf olt, %f, %zero : tensor<128xf32>
  %nf = arith.negf %f : tensor<128xf32>
  %abs = arith.select %neg, %nf, %f : tensor<128xi1>, tensor<128xf32>
  %b = arith.truncf %abs : tensor<128xf32> to tensor<128xbf16>
  tile.store %y[%a], %b : !tile.ptr<bf16>[tensor<128xi32>], tensor<128xbf16>
  return
}

// One element per thread: tiles become vector<1xT>.
// CHECK-LABEL: func.func @one_per_thread(
// CHECK-DAG:     %[[TWO:.*]] = arith.constant dense<2.000000e+00> : vector<1xf32>
// CHECK:         %[[TID:.*]] = simt.thread_id : i32
// CHECK:         %[[IDX:.*]] = vector.broadcast %[[TID]] : i32 to vector<1xi32>
// CHECK:         %[[V:.*]] = simt.load %arg0[%[[IDX]]] : !tile.ptr<f32>[vector<1xi32>] -> vector<1xf32>
// CHECK:         %[[W:.*]] = arith.mulf %[[V]], %[[TWO]] : vector<1xf32>
// CHECK:         simt.store %arg1[%[[IDX]]], %[[W]] : !tile.ptr<f32>[vector<1xi32>], vector<1xf32>
// A one-element vector.reduction folds to vector.extract.
// CHECK:         %[[X:.*]] = vector.extract %[[V]][0] : f32 from vector<1xf32>
// CHECK:         simt.block_reduce sum %[[X]] : f32
func.func @one_per_thread(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 4 : i64} {
  %a = tile.arange : tensor<128xi32>
  %v = tile.load %x[%a] : !tile.ptr<f32>[tensor<128xi32>] -> tensor<128xf32>
  %two = arith.constant dense<2.0> : tensor<128xf32>
  %w = arith.mulf %v, %two : tensor<128xf32>
  tile.store %out[%a], %w : !tile.ptr<f32>[tensor<128xi32>], tensor<128xf32>
  %s = tile.reduce sum %v : tensor<128xf32> -> f32
  %c0 = arith.constant 0 : i32
  tile.store %out[%c0], %s : !tile.ptr<f32>[i32], f32
  return
}

// Not a kernel and no tiles: left alone.
// CHECK-LABEL: func.func @helper(
// CHECK-NOT:     simt.threads
// CHECK:         return %arg0 : i32
func.func @helper(%a: i32) -> i32 {
  return %a : i32
}

// The arange of a kernel with simt.vec = 8 and 16 elements per thread: two
// groups of 8 adjacent elements, 8 * 128 apart.
// CHECK-LABEL: func.func @vec_groups
// CHECK-DAG:     arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 1024, 1025, 1026, 1027, 1028, 1029, 1030, 1031]> : vector<16xi32>
// CHECK-DAG:     %[[EIGHT:.*]] = arith.constant 8 : i32
// CHECK:         %[[TID:.*]] = simt.thread_id : i32
// CHECK:         arith.muli %[[TID]], %[[EIGHT]] : i32
func.func @vec_groups(%p: !tile.ptr<bf16>) attributes {tile.kernel, tile.num_warps = 4 : i64, simt.threads = 128 : i64, simt.vec = 8 : i64} {
  %a = tile.arange : tensor<2048xi32>
  %x = tile.load %p[%a] : !tile.ptr<bf16>[tensor<2048xi32>] -> tensor<2048xbf16>
  tile.store %p[%a], %x : !tile.ptr<bf16>[tensor<2048xi32>], tensor<2048xbf16>
  return
}

// A cluster reduction of scalars stays as it is (the emitter prints it with
// distributed shared memory); the tile reduction before it is lowered.
// CHECK-LABEL: func.func @cluster_sum(
// CHECK:         %[[LOCAL:.*]] = simt.block_reduce sum
// CHECK:         %[[ALL:.*]]:2 = tile.cluster_reduce sum %[[LOCAL]], %[[LOCAL]] : f32, f32 -> f32, f32
// CHECK:         simt.store %arg0[{{.*}}], %[[ALL]]#1
func.func @cluster_sum(%out: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.cluster_size = 4 : i64} {
  %a = tile.arange : tensor<32xi32>
  %f = arith.sitofp %a : tensor<32xi32> to tensor<32xf32>
  %s = tile.reduce sum %f : tensor<32xf32> -> f32
  %r:2 = tile.cluster_reduce sum %s, %s : f32, f32 -> f32, f32
  %z = arith.constant 0 : i32
  tile.store %out[%z], %r#1 : !tile.ptr<f32>[i32], f32
  return
}

// tile.dot becomes simt.dot on the thread's elements (32 threads: a 16x16 bf16
// tile is 8 elements each, the 16x8 f32 accumulator 4).
// CHECK-LABEL: func.func @dot(
// CHECK:         %{{.*}} = simt.dot %{{.*}}, %{{.*}}, %{{.*}} {k = 16 : i64, m = 16 : i64, n = 8 : i64} : vector<8xbf16>, vector<4xbf16>, vector<4xf32> -> vector<4xf32>
func.func @dot(%a: !tile.ptr<bf16>, %out: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  %ia = tile.arange : tensor<256xi32>
  %ib = tile.arange : tensor<128xi32>
  %x = tile.load %a[%ia] : !tile.ptr<bf16>[tensor<256xi32>] -> tensor<256xbf16>
  %y = tile.load %a[%ib] : !tile.ptr<bf16>[tensor<128xi32>] -> tensor<128xbf16>
  %z = arith.constant dense<0.0> : tensor<128xf32>
  %r = tile.dot %x, %y, %z {m = 16 : i64, n = 8 : i64, k = 16 : i64} : tensor<256xbf16>, tensor<128xbf16>, tensor<128xf32> -> tensor<128xf32>
  tile.store %out[%ib], %r : !tile.ptr<f32>[tensor<128xi32>], tensor<128xf32>
  return
}

// Rows of 8 do not fit a thread's group of 4 (f32 stores): row reductions
// and broadcasts go through shared memory (their simt forms).
// CHECK-LABEL: func.func @rows(
// CHECK:         %[[R:.*]] = simt.reduce_rows max %{{.*}} {cols = 8 : i64} : vector<8xf32> -> vector<1xf32>
// CHECK:         simt.broadcast_rows %[[R]] {cols = 8 : i64} : vector<1xf32> -> vector<8xf32>
func.func @rows(%out: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  %a = tile.arange : tensor<256xi32>
  %f = arith.sitofp %a : tensor<256xi32> to tensor<256xf32>
  %m = tile.reduce_rows max %f {cols = 8 : i64} : tensor<256xf32> -> tensor<32xf32>
  %b = tile.broadcast_rows %m {cols = 8 : i64} : tensor<32xf32> -> tensor<256xf32>
  tile.store %out[%a], %b : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  return
}

// Rows of 4 lie within a thread's group of 4: each thread combines its own
// elements in column order (no shared memory), and the broadcast repeats
// its own entries (here folded into the reductions' results).
// The row entries (64 = 2 per thread) have group 1, an arange of their size
// too: thread t holds rows t and t + 32.
// CHECK-LABEL: func.func @rows_in_thread(
// CHECK:         arith.constant dense<[0, 32]> : vector<2xi32>
// CHECK-NOT:     simt.reduce_rows
// CHECK:         %[[E0:.*]] = vector.extract %[[X:.*]][0] : f32 from vector<8xf32>
// CHECK:         %[[E1:.*]] = vector.extract %[[X]][1] : f32 from vector<8xf32>
// CHECK:         %[[M01:.*]] = arith.maximumf %[[E1]], %[[E0]] : f32
// CHECK:         %[[E2:.*]] = vector.extract %[[X]][2] : f32 from vector<8xf32>
// CHECK:         %[[M012:.*]] = arith.maximumf %[[E2]], %[[M01]] : f32
// CHECK:         %[[E3:.*]] = vector.extract %[[X]][3] : f32 from vector<8xf32>
// CHECK:         %[[R0:.*]] = arith.maximumf %[[E3]], %[[M012]] : f32
// CHECK:         vector.extract %[[X]][7] : f32 from vector<8xf32>
// CHECK:         %[[R1:.*]] = arith.maximumf
// CHECK-NOT:     simt.broadcast_rows
// CHECK:         vector.from_elements %[[R0]], %[[R0]], %[[R0]], %[[R0]], %[[R1]], %[[R1]], %[[R1]], %[[R1]] : vector<8xf32>
// CHECK:         simt.store %{{.*}} : !tile.ptr<f32>[vector<2xi32>], vector<2xf32>
func.func @rows_in_thread(%p: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  %a = tile.arange : tensor<256xi32>
  %x = tile.load %p[%a] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
  %m = tile.reduce_rows max %x {cols = 4 : i64} : tensor<256xf32> -> tensor<64xf32>
  %b = tile.broadcast_rows %m {cols = 4 : i64} : tensor<64xf32> -> tensor<256xf32>
  tile.store %p[%a], %b : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  %r = tile.arange : tensor<64xi32>
  tile.store %p[%r], %m : !tile.ptr<f32>[tensor<64xi32>], tensor<64xf32>
  return
}

// A 64 KiB matrix whose rows of 128 are 32 groups of 4 held by the 32 lanes
// of one warp: the lanes combine by shuffles and only the row values pass
// through shared memory, so the matrix may exceed 32 KiB.
// CHECK-LABEL: func.func @rows_in_warp_lanes(
// CHECK:         simt.reduce_rows sum %{{.*}} {cols = 128 : i64} : vector<256xf32> -> vector<2xf32>
func.func @rows_in_warp_lanes(%p: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 2 : i64} {
  %a = tile.arange : tensor<16384xi32>
  %x = tile.load %p[%a] : !tile.ptr<f32>[tensor<16384xi32>] -> tensor<16384xf32>
  %s = tile.reduce_rows sum %x {cols = 128 : i64} : tensor<16384xf32> -> tensor<128xf32>
  %r = tile.arange : tensor<128xi32>
  tile.store %p[%r], %s : !tile.ptr<f32>[tensor<128xi32>], tensor<128xf32>
  return
}
