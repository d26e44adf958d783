# The canonical kernel bugs of issue 22 (and one in the GEMM's staged epilogue of issue 19),
# each a literal edit of one source file that the mutation runner (.ci/mutations/run)
# applies to a copy. `missed`: the classes the emulation could not see before its memory
# checks; `expect`: a regular expression the failing run's output must contain (the check
# that must catch it); `equivalent`: a rewrite that changes no behaviour, which must pass
# without any report.
# Every mode (ldmatrix and plain fragment loads) and K up to 257, so the GEMM main loop
# runs several k steps and loads the next stage in it (the test program's own GEMM kernels).
BMM = "mma_gemm matches the f64 product on odd shapes with both tile configs"
UNSCALE = "the multi-tensor unscale on cuda matches the CPU, counts and flag included"
NUMERICS = "numerics statistics on cuda equal the CPU's"
BATCH_NORM = "cuda batch_norm kernels equal the CPU's"
# The Hopper kernel on the emulation's sm_90 model (issue 19): K up to 1000, so the ring of
# stages wraps; B K- and N-major; TMA-stored tiles.
HOPPER = "cuda bmm on an sm_90 runs the Hopper kernel and equals the CPU's"
# Split-K (issue 31): conv weight gradients split 3 ways against the unsplit ones and the CPU.
SPLITK = "cuda conv2d weight gradient split over K equals the unsplit one and the CPU's, bit-identical run to run"

MUTANTS = [
    dict(name="gemm-cp-async-before-barrier", missed=True, file="cuda/mma_gemm.h", tests=BMM,
         # the reader is the kernel's ldmatrix (mma_gemm.h), the writer the stage loader (mma_operands.h)
         expect=r"racecheck: (write-after-read|read-after-write) hazard on dynamic shared memory"
                r".*(mma_gemm\.h:\d+.*mma_operands\.h:\d+|mma_operands\.h:\d+.*mma_gemm\.h:\d+)",
         find="""        sync_threads();  // step kt is visible to all, and step kt-1's buffer is free
        if (kt + S - 1 < k_tiles) stage(kt + S - 1);
""",
         replace="""        if (kt + S - 1 < k_tiles) stage(kt + S - 1);
        sync_threads();  // step kt is visible to all, and step kt-1's buffer is free
"""),
    dict(name="block-reduce-no-barrier-before-reuse", missed=True, file="cuda/block_reduce.h", tests=NUMERICS,
         expect=r"racecheck: (write-after-read|read-after-write) hazard on static __shared__ memory.*block_reduce\.h:\d+.*block_reduce\.h:\d+",
         find="""  sync_threads();  // the previous call's readers are done with `partial`
""", replace=""),
    dict(name="amp-count-plain-add-across-blocks", missed=True, file="cuda/amp.cu", tests=UNSCALE,
         expect=r"racecheck: .* hazard on device memory.*amp\.cu:\d+.*amp\.cu:\d+ \(different blocks",
         find="""    atomic_add(b.count[t], static_cast<unsigned long long>(bad));""",
         replace="""    *b.count[t] += static_cast<unsigned long long>(bad);"""),
    dict(name="numerics-histogram-plain-add", missed=True, file="cuda/numerics.cu", tests=NUMERICS,
         expect=r"racecheck: .* hazard on static __shared__ memory.*numerics\.cu:\d+.*numerics\.cu:\d+",
         find="""    atomic_add(&hist[bin - kNumericsHistLo], 1ull);""",
         replace="""    hist[bin - kNumericsHistLo] += 1;"""),
    dict(name="batch-norm-one-shared-row", missed=True, file="cuda/batch_norm.cu", tests=BATCH_NORM,
         expect=r"racecheck: .* hazard on static __shared__ memory.*batch_norm\.cu:\d+.*batch_norm\.cu:\d+",
         find="""  part[0][ty][tx] = total.a;
  part[1][ty][tx] = total.b;
  sync_threads();
  Pair<S> sum{S(0), S(0)};
  for (int y = 0; y < kRowLanes; ++y) {
    sum.a += part[0][y][tx];
    sum.b += part[1][y][tx];
  }
""",
         replace="""  if (ty == 0) {
    part[0][0][tx] = S(0);
    part[1][0][tx] = S(0);
  }
  sync_threads();
  part[0][0][tx] += total.a;
  part[1][0][tx] += total.b;
  sync_threads();
  Pair<S> sum{part[0][0][tx], part[1][0][tx]};
"""),
    dict(name="gemm-cp-async-wait-count", file="cuda/mma_gemm.h", tests=BMM,
         find="""        cp_async_wait<S - 2>();
        sync_threads();  // step kt is visible""",
         replace="""        cp_async_wait<S - 1>();
        sync_threads();  // step kt is visible"""),
    dict(name="gemm-epilogue-reads-before-staged", file="cuda/mma_gemm.h", tests=BMM,
         find="""      sync_threads();  // the whole tile is staged
""", replace=""),
    dict(name="warp-reduce-shuffle-offset", file="cuda/block_reduce.h", tests=NUMERICS,
         find="""for (unsigned o = 16; o > 0; o >>= 1)""", replace="""for (unsigned o = 8; o > 0; o >>= 1)"""),
    dict(name="block-reduce-read-too-early", file="cuda/block_reduce.h", tests=NUMERICS,
         find="""  if (lane == 0) partial[warp] = v;
  sync_threads();
""", replace="""  if (lane == 0) partial[warp] = v;
"""),
    dict(name="found-inf-misses-nan", file="cuda/amp.cu", tests=UNSCALE,
         find="""  return !math_isfinite(static_cast<double>(dev_load(x)));""",
         replace="""  return !math_isfinite(static_cast<double>(dev_load(x))) && !math_isnan(static_cast<double>(dev_load(x)));"""),
    dict(name="mma-fragment-table-rows", file="cuda/primitives/mma_layout.h",
         tests="mma m16n8k16 f16 and bf16 and m16n8k8 tf32 follow the PTX fragment tables",
         find="""  return {lane / 4 + (i & 2 ? 8 : 0), lane % 4 * 2 + (i & 1) + (i >= 4 ? 8 : 0)};""",
         replace="""  return {lane / 4 + (i >= 4 ? 8 : 0), lane % 4 * 2 + (i & 1) + (i & 2 ? 8 : 0)};"""),
    dict(name="numerics-histogram-not-zeroed", file="cuda/numerics.cu", tests=NUMERICS,
         find="""  for (unsigned f = threadIdx.x; f < kNumericsBins; f += blockDim.x) hist[f] = 0;
""", replace=""),
    dict(name="unscale-bounds-predicate", file="cuda/amp.cu", tests=UNSCALE,
         find="""for (int64_t k = scalar_from + threadIdx.x; k < end; k += blockDim.x)""",
         replace="""for (int64_t k = scalar_from + threadIdx.x; k <= end; k += blockDim.x)"""),
    dict(name="found-inf-set-by-every-thread", equivalent=True, file="cuda/amp.cu", tests=UNSCALE,
         find="""    atomic_add(b.count[t], static_cast<unsigned long long>(bad));
    atomic_exch(reinterpret_cast<uint32_t*>(found_inf), 0x3f800000u);  // 1.0f
  }""",
         replace="""    atomic_add(b.count[t], static_cast<unsigned long long>(bad));
  }
  if (bad > 0) atomic_exch(reinterpret_cast<uint32_t*>(found_inf), 0x3f800000u);  // every thread holds the sum"""),
    dict(name="splitk-reduction-drops-last-chunk", file="cuda/mma_gemm.h", tests=SPLITK,
         find="""for (int64_t s = 1; s < split; ++s)""", replace="""for (int64_t s = 1; s + 1 < split; ++s)"""),
    dict(name="hopper-consumer-skips-full-wait", file="cuda/hopper_gemm_kernel.h", tests=HOPPER,
         find="""      mbarrier_wait(&full[stage], phase);
""", replace=""),
    dict(name="hopper-stage-released-before-its-wgmma-retires", file="cuda/hopper_gemm_kernel.h", tests=HOPPER,
         find="""      wgmma_wait<1>();""", replace="""      wgmma_wait<2>();"""),
    dict(name="hopper-staging-box-rewritten-before-store-read", file="cuda/hopper_gemm_kernel.h", tests=HOPPER,
         find="""    if (t == 0) tma_store_wait_read<1>();""", replace="""    if (t == 0) tma_store_wait_read<2>();"""),
]
