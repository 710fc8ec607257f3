"""Every server flag of SGLang's ``ServerArgs`` in exactly one of three classes, for a pasted
launch command (:mod:`.launch_command`).

* **planned** (:data:`MODELLED`): passed on to ``plan`` in its SGLang spelling;
* **refused by name**: :data:`NOT_MODELLED` (the flag changes what a GPU holds in a way the
  planner does not model; the reason names what), :data:`REFUSED_UNLESS` (refused unless its
  value is one that changes nothing: ``--load-format safetensors`` is fine, ``--load-format
  bitsandbytes`` is not), :data:`GRAPH_RESERVE_FLAGS` (they change SGLang's default
  ``--mem-fraction-static``, its CUDA-graph reserve: refused unless the fraction is given) and
  :data:`CONFIG_FLAG` (``--config FILE``: SGLang reads further launch flags from a YAML file; the
  planner does not read it, so the command is refused naming the flag: paste the flags instead);
* **reviewed as not changing memory** (:data:`NO_EFFECT`): servers, tokenizers, schedulers,
  logging, metrics, kernels and backends chosen after the pool is sized, and options of features
  that a refused flag switches on (``--hicache-ratio`` does nothing without
  ``--enable-hierarchical-cache``). They are listed as ignored.

``tests/sglang/test_pasted_command.py`` checks that every canonical flag of
:data:`~kvstrategies.sglang.tables.flags.SGLANG_FLAG_VALUES` is in exactly one class.
"""

from __future__ import annotations

from .server_arguments import RENAMED_SERVER_ARGUMENTS

#: SGLang flags ``plan`` understands (canonical SGLang spelling; ``plan`` accepts them verbatim)
MODELLED = frozenset(
    {
        "--attention-backend",
        "--attn-dp-size",
        "--chunked-prefill-size",
        "--context-length",
        "--cuda-graph-max-bs-decode",
        "--dcp-size",
        "--decode-attention-backend",
        "--device",
        "--disable-cuda-graph",
        "--disable-hybrid-swa-memory",
        "--disable-overlap-schedule",
        "--disable-prefill-cuda-graph",
        "--disable-radix-cache",
        "--disaggregation-mode",
        "--dp-size",
        "--dtype",
        "--enable-dp-attention",
        "--enable-multimodal",
        "--ep-size",
        "--kv-cache-dtype",
        "--language-only",
        "--mamba-radix-cache-strategy",
        "--mamba-ssm-dtype",
        "--max-prefill-tokens",
        "--max-running-requests",
        "--max-total-tokens",
        "--mem-fraction-static",
        "--model-path",
        "--moe-a2a-backend",
        "--moe-runner-backend",
        "--page-size",
        "--pp-size",
        "--prefill-attention-backend",
        "--quantization",
        "--speculative-algorithm",
        "--speculative-draft-model-path",
        "--speculative-eagle-topk",
        "--speculative-num-draft-tokens",
        "--speculative-num-steps",
        "--swa-full-tokens-ratio",
        "--tp-size",
    }
)

#: SGLang flags that change what a GPU holds but that the planner does not model -> what changes
NOT_MODELLED: dict[str, str] = {
    "--cpu-offload-gb": "weights offloaded to the CPU",
    "--offload-group-size": "layer offloading",
    "--offload-mode": "layer offloading",
    "--offload-num-in-group": "layer offloading",
    "--offload-prefetch-step": "layer offloading",
    "--ple-offload-embedding": "embedding offloading",
    "--enable-lora": "LoRA adapter memory",
    "--lora-paths": "LoRA adapter memory",
    "--max-loras-per-batch": "LoRA adapter memory",
    "--max-lora-rank": "LoRA adapter memory",
    "--max-loaded-loras": "LoRA adapter memory",
    "--uno-lora-path": "LoRA adapter memory",
    "--enable-hierarchical-cache": "hierarchical cache layout",
    "--enable-unified-memory": "a unified KV memory pool",
    "--enable-kv-cache-sharding": "KV cache sharding",
    "--prefill-only-disable-kv-cache": "no KV cache allocation",
    "--json-model-override-args": "a rewritten model config",
    "--max-mamba-cache-size": "the Mamba state pool size",
    "--mamba-full-memory-ratio": "the Mamba / full-attention memory split",
    "--speculative-draft-kv-cache-dtype": "the draft model's KV dtype",
    "--speculative-draft-model-quantization": "the draft model's weights",
    "--moe-dense-tp-size": "dense-layer weight sharding",
    "--moe-dp-size": "MoE weight sharding",
    "--attn-cp-size": "context-parallel KV sharding",
    "--enable-paged-experts": "expert weights paged in and out",
    "--paged-experts-num-resident": "expert weights paged in and out",
    "--dsa-prefill-backend": "DSA backend-specific KV buffers",
    "--dsa-decode-backend": "DSA backend-specific KV buffers",
    "--dsv4-attn-backend": "DeepSeek-V4 backend-specific KV buffers",
    "--c128-page-size": "the NPU DeepSeek-V4 C128 page",
    "--quantize-and-serve": "weights quantized at load",
    "--modelopt-quant": "weights quantized at load",
    "--is-embedding": "an embedding server",
    "--enable-page-major-kv-layout": "a page-major KV layout",
    "--pp-max-micro-batch-size": "pipeline micro-batch request slots",
    "--dwdp-size": "distributed weight data parallelism (weights per rank)",
    "--dcp-replicate-q-proj": "replicated Q-projection weights",
    "--enable-prefill-cp": "prefill context parallelism",
    "--enable-dsa-cache-layer-split": "DSA cache layers split over context-parallel ranks",
    "--enable-cp-decode-attn-tp": "attention weights sliced under context parallelism",
    "--enable-dp-lm-head": "the LM head sharded over the attention-TP group",
    "--enable-shared-experts-attn-tp": "shared-expert weights sharded over the attention-TP group",
    "--shared-experts-tp-size": "shared-expert weight sharding",
    "--enable-dense-mlp-attn-tp": "dense-MLP weights sharded over the attention-TP group",
    "--enable-deepseek-v4-fp4-indexer": "a DeepSeek-V4 FP4 indexer cache",
    "--enable-nccl-nvls": "NCCL NVLS buffers",
    "--enable-symm-mem": "NCCL symmetric-memory buffers",
    "--enable-mscclpp": "MSCCL++ buffers",
    "--enable-torch-symm-mem": "torch symmetric-memory buffers",
    "--disable-custom-all-reduce": "the custom all-reduce buffers held before weights load",
    "--pre-warm-nccl": "NCCL buffers allocated before the KV pool is sized",
    "--flashinfer-allreduce-fusion-backend": "FlashInfer all-reduce fusion workspaces",
    "--enable-flashinfer-allreduce-fusion": "FlashInfer all-reduce fusion workspaces",
    "--enforce-disable-flashinfer-allreduce-fusion": "FlashInfer all-reduce fusion workspaces",
    "--enable-aiter-allreduce-fusion": "Aiter all-reduce fusion workspaces",
    "--speculative-dflash-block-size": "the DFLASH verify window (give it as --speculative-num-draft-tokens)",
    "--speculative-dspark-block-size": "the DSPARK draft block",
    "--speculative-token-map": "the draft model's reduced vocabulary",
    "--speculative-draft-window-size": "the draft model's sliding-window KV pool",
    "--speculative-draft-sink-size": "the draft model's attention-sink KV",
    "--enable-multi-layer-eagle": "multi-layer EAGLE draft layers and pools",
    "--speculative-adaptive": "adaptive speculative steps",
    "--deepep-config": "DeepEP buffer sizes",
    "--deepep-v2-mode": "DeepEP v2 buffers",
    "--ep-num-redundant-experts": "redundant expert weights",
    "--enable-eplb": "expert-parallel load balancing (redundant experts)",
    "--enable-elastic-expert-backup": "elastic expert backups",
    "--max-ep-size": "elastic EP per-rank state",
    "--elastic-ep-initial-size": "the elastic EP expert storage layout",
    "--enable-waterfill": "the shared expert dispatched as a routed slot",
    "--disable-shared-experts-fusion": "shared experts fused into the routed experts",
    "--enforce-shared-experts-fusion": "shared experts fused into the routed experts",
    "--mamba-track-interval": "Mamba state tracking buffers",
    "--enable-int8-mamba-checkpoint": "an int8 Mamba checkpoint pool",
    "--int8-mamba-ckpt-size": "an int8 Mamba checkpoint pool",
    "--enable-linear-replayssm": "ReplaySSM ring buffers",
    "--linear-replayssm-cache-len": "ReplaySSM ring buffers",
    "--enable-linear-replayssm-spec": "ReplaySSM ring buffers",
    "--enable-unified-cache-external-linker": "an external KV store linked to the radix cache",
    "--enable-hisparse": "hierarchical sparse attention buffers",
    "--enable-prefix-mm-cache": "a multimodal prefix cache",
    "--mm-enable-dp-encoder": "the multimodal encoder replicated instead of TP-sharded",
    "--limit-mm-data-per-request": "the multimodal memory reserve",
    "--enable-two-batch-overlap": "two-batch-overlap buffers",
    "--enable-single-batch-overlap": "single-batch-overlap buffers",
    "--enable-lmcache": "an LMCache hierarchical cache",
    "--enable-flexkv": "a FlexKV hierarchical cache",
    "--kt-weight-path": "CPU-offloaded experts (ktransformers)",
    "--kt-method": "CPU-offloaded experts (ktransformers)",
    "--kt-num-gpu-experts": "CPU-offloaded experts (ktransformers)",
    "--kt-max-deferred-experts-per-token": "CPU-offloaded experts (ktransformers)",
    "--dllm-algorithm": "a diffusion LLM's block memory",
    "--disaggregation-decode-extra-slots": "extra decode request slots (a case file's "
    "disaggregation_decode_extra_slots)",
    "--encoder-only": "an encoder-only server",
    "--language-model-only": "the multimodal encoder left out",
    "--enable-pdmux": "PD-multiplexing streams",
    "--decrypted-config-file": "a model config read from another file",
    "--decrypted-draft-config-file": "a draft model config read from another file",
    "--enable-deterministic-inference": "deterministic-inference launch rules",
    "--rl-on-policy-target": "RL on-policy launch rules",
    "--enable-memory-saver": "pools allocated through torch_memory_saver",
    "--enable-return-routed-experts": "a routed-experts capture buffer",
    "--enable-return-indexer-topk": "an indexer top-k capture buffer",
    "--enable-pd-role-switch": "pools for both PD roles",
    "--swa-prefix-tails": "the SWA pool sized from the request cap (a case file's swa_prefix_tails)",
    "--enable-encoder-swa-bounded-replay": "DeepSeek-V4.1 SWA bounded-replay pools",
    "--enable-decoder-swa-bounded-replay": "DeepSeek-V4.1 SWA bounded-replay pools",
}

#: flags refused unless their value is one of the harmless ones -> (what changes, harmless values)
REFUSED_UNLESS: dict[str, tuple[str, tuple[str, ...]]] = {
    "--load-format": (
        "weights loaded in another format",
        ("auto", "pt", "safetensors", "npcache", "dummy", "fastsafetensors", "instanttensor"),
    ),
    "--model-impl": ("another model implementation", ("auto", "sglang")),
    "--revision": ("another revision of the model's config and weights", ("main",)),
    "--model-config-parser": ("another parser of the model config", ("auto", "hf")),
    "--nnodes": ("multi-node communication buffers", ("1",)),
    "--deepep-mode": ("DeepEP buffer modes", ("auto",)),
    "--weight-cache-mode": ("weights shared through a weight-cache daemon", ("off",)),
    "--startup-weight-load-mode": ("weights loaded while CUDA graphs are captured", ("serial",)),
    "--mm-feature-transport": ("a CUDA IPC feature pool", ("cpu",)),
    "--kv-canary": ("KV canary buffers", ("none",)),
    "--decoupled-spec-role": ("a decoupled speculative-decoding role", ("null",)),
    "--elastic-ep-backend": ("elastic expert parallelism", ("none",)),
    "--qsa-indexer-dtype": ("the QSA indexer cache dtype", ("auto",)),
}

#: CUDA-graph sizing flags: they change SGLang's default ``--mem-fraction-static`` (its graph
#: reserve) in ways not modelled, so they are refused unless the fraction is given
GRAPH_RESERVE_FLAGS = frozenset(
    {
        "--cuda-graph-backend-decode",
        "--cuda-graph-backend-prefill",
        "--cuda-graph-bs-decode",
        "--cuda-graph-bs-prefill",
        "--cuda-graph-config",
        "--cuda-graph-max-bs-prefill",
        "--cuda-graph-max-seq-len-prefill",
        "--cuda-graph-prefill-max-context",
        "--debug-cuda-graph",
        "--disable-decode-cuda-graph",
        "--enable-torch-compile",
        "--torch-compile-max-bs",
    }
)

#: ``--config FILE``: SGLang merges launch flags from a YAML file (``ConfigArgumentMerger``)
CONFIG_FLAG = "--config"


def _names(text: str) -> frozenset[str]:
    """The whitespace-separated names of ``text``."""
    return frozenset(text.split())


#: reviewed: flags that do not change what the KV pool, the weights or the pre-load memory hold
NO_EFFECT = _names(
    """
    --abort-on-priority-when-disabled --admin-api-key --allow-auto-truncate --allowed-media-domains --api-key
    --asr-max-buffer-seconds --asr-max-concurrent-sessions --base-gpu-id --batch-notify-size --bf16-gemm-backend
    --boundary-reduction --bucket-e2e-request-latency --bucket-inter-token-latency --bucket-time-to-first-token
    --chat-template --checkpoint-engine-wait-weights-before-ready --completion-template
    --constrained-json-disable-any-whitespace --constrained-json-max-whitespace-cnt
    --constrained-json-whitespace-pattern --cp-strategy --crash-dump-folder --custom-weight-loader
    --dcp-comm-backend --debug-tensor-dump-input-file --debug-tensor-dump-layers --debug-tensor-dump-output-folder
    --decode-log-interval --decoupled-spec-bind-endpoint --decoupled-spec-connect-endpoints --decoupled-spec-rank
    --deepep-dispatcher-output-dtype --default-chat-template-kwargs --default-priority-value
    --delete-ckpt-after-loading --detokenizer-worker-num --disable-aiter-allreduce-fusion-in-decode
    --disable-aiter-allreduce-fusion-in-prefill --disable-attn-tp-gather --disable-chunked-prefix-cache
    --disable-cuda-graph-padding --disable-fast-image-processor --disable-flashinfer-autotune
    --disable-flashinfer-cutlass-moe-fp4-allgather --disable-outlines-disk-cache --disable-priority-preemption
    --disable-tokenizer-batch-decode --disaggregation-bootstrap-port --disaggregation-decode-allocation-policy
    --disaggregation-decode-enable-offload-kvcache --disaggregation-decode-enable-radix-cache
    --disaggregation-decode-host-receive-threshold --disaggregation-decode-polling-interval
    --disaggregation-decode-retraction-backup --disaggregation-enable-kv-checksum --disaggregation-ib-device
    --disaggregation-transfer-backend --dist-init-addr --dist-timeout --dllm-algorithm-config --dllm-fdfo
    --download-dir --dsa-paged-mqa-logits-backend --dsa-topk-backend --dsa-triton-union --dsv4-prefill-backend
    --dynamic-batch-tokenizer-batch-size --dynamic-batch-tokenizer-batch-timeout --elastic-ep-join-mode
    --elastic-ep-join-rank-offset --elastic-ep-scale-timeout --enable-adaptive-dispatch-to-encoder
    --enable-amd-monokernel --enable-attn-tp-input-scattered --enable-broadcast-mm-inputs-process
    --enable-cache-report --enable-cudagraph-gc --enable-custom-logit-processor
    --enable-dp-attention-local-control-broadcast --enable-draft-weights-cpu-backup --enable-dsa-fused-indexer
    --enable-dynamic-batch-tokenizer --enable-dynamic-chunking --enable-forward-pass-metrics --enable-fp32-lm-head
    --enable-fused-moe-sum-all-reduce --enable-fused-qk-norm-rope --enable-http-worker-reuseport --enable-http2
    --enable-layernorm-sp --enable-layerwise-nvtx-marker --enable-lean-attention --enable-linker-mla-dedup
    --enable-lora-overlap-loading --enable-mamba-cache-stochastic-rounding --enable-megamoe-for-layernorm-sp
    --enable-metrics --enable-metrics-for-all-schedulers --enable-mfu-metrics --enable-mis --enable-mixed-chunk
    --enable-mm-global-cache --enable-nvidia-megakernel --enable-p2p-check --enable-precise-embedding-interpolation
    --enable-prefill-delayer --enable-priority-scheduling --enable-profile-cuda-graph --enable-quant-communications
    --enable-request-time-stats-logging --enable-response-store --enable-return-aux-hidden-states
    --enable-return-hidden-states --enable-scattered-sconv --enable-session-radix-cache --enable-ssl-refresh
    --enable-streaming-session --enable-strict-thinking --enable-tf32-matmul --enable-tokenizer-batch-encode
    --enable-torch-compile-debug-mode --enable-tp-lm-head-all-to-all --enable-trace --enable-w4a4-mxfp4-megamoe
    --enable-watermark --enable-weights-cpu-backup --encoder-bootstrap-port --encoder-register-urls
    --encoder-transfer-backend --encoder-urls --engine-info-bootstrap-port --ep-dispatch-algorithm --eplb-algorithm
    --eplb-min-rebalancing-utilization-threshold --eplb-rebalance-layers-per-chunk --eplb-rebalance-num-iterations
    --expert-balancedness-report-mode --expert-distribution-recorder-buffer-size --expert-distribution-recorder-mode
    --experts-shared-outer-loras --export-metrics-to-file --export-metrics-to-file-dir --extra-metric-labels
    --fastapi-root-path --file-storage-path --flashinfer-a2a-dispatch-type --flashinfer-autotune-skip-ops
    --flashinfer-mla-disable-ragged --flashinfer-mxfp4-moe-precision --flexkv-config-file --forward-hooks
    --forward-pass-metrics-ipc-name --forward-pass-metrics-worker-id --fp4-gemm-backend --fp8-gemm-backend
    --fuseep-mode --gated-launch-port --gc-threshold --gc-warning-threshold-secs --generation-tokens-buckets
    --gpu-id-step --grammar-backend --grpc-mode --grpc-port --grpc-response-timeout-secs --hf-chat-template-name
    --hicache-host-memory-fraction --hicache-host-memory-mode --hicache-io-backend --hicache-mem-layout
    --hicache-ratio --hicache-size --hicache-storage-backend --hicache-storage-backend-extra-config
    --hicache-storage-prefetch-policy --hicache-storage-prefetch-retry-max-attempts
    --hicache-storage-prefetch-retry-poll-interval --hicache-write-policy --hisparse-config --host
    --http2-initial-connection-window-size --http2-max-concurrent-streams --image-processor-backend
    --incremental-streaming-output --init-expert-location --kt-cpuinfer --kt-threadpool-count --kv-canary-real-data
    --kv-canary-sweep-interval --kv-events-config --linear-attn-backend --linear-attn-decode-backend
    --linear-attn-prefill-backend --linear-attn-verify-backend --lmcache-config-file --load-balance-method
    --load-publish-endpoint --load-snapshot-publish-interval --log-level --log-level-http --log-requests
    --log-requests-format --log-requests-level --log-requests-target --lora-backend --lora-drain-wait-threshold
    --lora-eviction-policy --lora-strict-loading --lora-target-modules --lora-use-virtual-experts --mamba-backend
    --mamba-cache-philox-rounds --mamba-max-states-per-path --max-lora-chunk-size --max-queued-requests
    --media-url-max-file-size-mb --min-free-slots-delay --mlx-enable-sampling --mm-attention-backend
    --mm-global-cache-backend --mm-io-worker-num --mm-preprocess-cache-size-mb --mm-process-config
    --mm-processor-worker-num --model-checksum --model-loader-extra-config --modelexpress-config
    --modelopt-checkpoint-restore-path --modelopt-checkpoint-save-path --modelopt-export-path --monokernel-backend
    --mooncake-ib-device --msprobe-dump-config --nccl-port --node-rank --num-continuous-decode-steps
    --num-reserved-decode-tokens --numa-node --optimistic-prefill-attempts --otlp-service-name
    --otlp-traces-endpoint --pdmux-config-path --ple-offload-backend --ple-offload-dir --port --pp-async-batch-depth
    --preferred-sampling-params --prefill-decode-interval --prefill-decode-interval-min-bs
    --prefill-delayer-forward-passes-buckets --prefill-delayer-max-delay-ms --prefill-delayer-max-delay-passes
    --prefill-delayer-queue-min-ratio --prefill-delayer-token-usage-low-watermark
    --prefill-delayer-wait-seconds-buckets --prefill-kv-cache-dequant-dtype --prefill-max-requests
    --priority-scheduling-preemption-threshold --prompt-tokens-buckets --quantization-param-path
    --radix-cache-backend --radix-eviction-policy --radix-eviction-policy-config --random-seed --reasoning-parser
    --remote-instance-weight-loader-backend --remote-instance-weight-loader-seed-instance-ip
    --remote-instance-weight-loader-seed-instance-service-port
    --remote-instance-weight-loader-send-weights-group-ports
    --remote-instance-weight-loader-start-seed-via-transfer-engine --retraction-policy
    --return-aux-hidden-state-layer-ids --return-hidden-states-mode --return-input-ids --return-output-ids
    --rl-quant-profile --sampling-backend --sampling-defaults --sampling-mask-max-tokens --schedule-conservativeness
    --schedule-low-priority-values-first --schedule-policy --scheduler-recv-interval --served-model-name
    --show-time-cost --sidecar --sidecar-args --skip-server-warmup --skip-tokenizer-init --sleep-on-idle
    --sm-group-num --smg-grpc-mode --smg-http-sidecar-port --soft-watchdog-timeout --spec-trace-dir
    --speculative-accept-threshold-acc --speculative-accept-threshold-single --speculative-adaptive-config
    --speculative-attention-mode --speculative-domino-candidate-pool-size --speculative-draft-attention-backend
    --speculative-draft-load-format --speculative-draft-model-revision --speculative-dsa-topk-backend
    --speculative-dspark-align-verify-tokens-to-graph-tier --speculative-dspark-confidence-sts-path
    --speculative-dspark-sps-table-path --speculative-enable-w4a4-mxfp4-megamoe --speculative-moe-a2a-backend
    --speculative-moe-runner-backend --speculative-ngram-capacity --speculative-ngram-external-corpus-max-tokens
    --speculative-ngram-external-corpus-path --speculative-ngram-external-sam-budget --speculative-ngram-match-type
    --speculative-ngram-max-bfs-breadth --speculative-ngram-max-trie-depth --speculative-ngram-min-bfs-breadth
    --speculative-use-block-verification --speculative-use-rejection-sampling --ssl-ca-certs --ssl-certfile
    --ssl-keyfile --ssl-keyfile-password --stream-interval --stream-response-default-include-usage
    --strip-thinking-cache --tbo-token-distribution-threshold --tokenizer-backend
    --tokenizer-metrics-allowed-custom-labels --tokenizer-metrics-custom-labels-header --tokenizer-mode
    --tokenizer-path --tokenizer-worker-num --tool-call-parser --tool-server --trace-modules
    --triton-attention-num-kv-splits --triton-attention-reduce-in-fp32 --triton-attention-split-tile-size
    --trust-mm-content-hashes --trust-remote-code --trust-request-chat-template
    --unified-cache-external-linker-backend --unified-cache-external-linker-config --use-ray
    --uvicorn-access-log-exclude-prefixes --warmups --watchdog-timeout --watermark-config --weight-cache-socket
    --weight-cache-timeout --weight-loader-disable-mmap --weight-loader-drop-cache-after-load
    --weight-loader-prefetch-checkpoints --weight-loader-prefetch-num-threads --weight-version
    """
)

# ---- flags only older SGLang releases have (``tables/flag_releases.py``), in the same classes ----

#: refused by name: they change what a GPU holds in a way the planner does not model
OLDER_NOT_MODELLED: dict[str, str] = {
    "--enable-deepep-moe": "SGLang 0.5.4's spelling of --moe-a2a-backend deepep (the DeepEP prefill graph): use that",
    "--enable-ep-moe": "SGLang 0.5.4's spelling of expert parallelism (--ep-size): use that",
    "--enable-flashinfer-cutedsl-moe": "SGLang 0.5.4's spelling of --moe-runner-backend flashinfer_cutedsl: use that",
    "--enable-flashinfer-cutlass-moe": "SGLang 0.5.4's spelling of --moe-runner-backend flashinfer_cutlass: use that",
    "--enable-flashinfer-mxfp4-moe": "SGLang 0.5.4's spelling of --moe-runner-backend flashinfer_mxfp4: use that",
    "--enable-flashinfer-trtllm-moe": "SGLang 0.5.4's spelling of --moe-runner-backend flashinfer_trtllm: use that",
    "--enable-triton-kernel-moe": "SGLang 0.5.4's spelling of --moe-runner-backend triton_kernel: use that",
    "--enable-beta-spec": "SGLang 0.5.4's beta speculative worker (overlap scheduler under speculation)",
    "--kt-amx-weight-path": "CPU-offloaded experts (ktransformers; SGLang 0.5.5's spelling of --kt-weight-path)",
    "--kt-amx-method": "CPU-offloaded experts (ktransformers; SGLang 0.5.5's spelling of --kt-method)",
    "--hybrid-kvcache-ratio": "the Llama-4 chunked-attention pool split up to SGLang 0.5.7 (is_hybrid_model)",
    "--nsa-prefill-backend": "DSA backend-specific KV buffers",
    "--nsa-decode-backend": "DSA backend-specific KV buffers",
    "--nsa-prefill": "DSA backend-specific KV buffers (SGLang 0.5.3's spelling of --dsa-prefill-backend)",
    "--nsa-decode": "DSA backend-specific KV buffers (SGLang 0.5.3's spelling of --dsa-decode-backend)",
    "--enable-prefill-context-parallel": "context-parallel KV sharding",
    "--enable-nsa-prefill-context-parallel": "context-parallel KV sharding",
    "--enable-dsa-prefill-context-parallel": "context-parallel KV sharding",
    "--prefill-cp-mode": "context-parallel KV sharding",
    "--nsa-prefill-cp-mode": "context-parallel KV sharding",
    "--dsa-prefill-cp-mode": "context-parallel KV sharding",
    "--keep-mm-feature-on-device": "multimodal features kept on the GPU",
    "--torchao-config": "weights quantized at load",
    "--enable-gdn-replayssm-spec": "replay state buffers for speculative GDN layers",
    "--speculative-dflash-draft-window-size": "the DFLASH draft's KV window",
    "--speculative-draft-window-size": "the DFLASH draft's KV window",
    # 0.5.10 (DoubleSparseTokenToKVPool keeps per-layer label buffers of the heavy channels)
    "--enable-double-sparsity": "double-sparsity label buffers in the KV pool",
    "--ds-channel-config-path": "double-sparsity label buffers in the KV pool",
    "--ds-heavy-channel-num": "double-sparsity label buffers in the KV pool",
    "--ds-heavy-channel-type": "double-sparsity label buffers in the KV pool",
}
#: the older releases' CUDA-graph sizing flags (legacy and piecewise spellings)
OLDER_GRAPH_RESERVE_FLAGS = frozenset(
    {
        "--cuda-graph-bs",
        "--cuda-graph-max-bs",
        "--disable-piecewise-cuda-graph",
        "--enforce-piecewise-cuda-graph",
        "--enable-breakable-cuda-graph",
        "--piecewise-cuda-graph-max-tokens",
        "--piecewise-cuda-graph-tokens",
    }
)
#: reviewed as not changing memory
OLDER_NO_EFFECT = _names(
    """
    --collect-tokens-histogram --cuda-graph-tc-compiler --elastic-ep-rejoin --enable-deepep-waterfill
    --enable-expert-distribution-metrics --optimistic-prefill-retries --piecewise-cuda-graph-compiler
    --prefill-round-robin-balance --speculative-skip-dp-mlp-sync --stream-output
    --custom-sigquit-handler --debug-tensor-dump-inject --enable-piecewise-cuda-graph
    --enable-nan-detection --record-nolora-graph
    --ds-heavy-token-num --ds-sparse-decode-threshold --multi-item-scoring-delimiter
    --disable-hicache-numa-detect --disaggregation-decode-dp --disaggregation-decode-tp --disaggregation-prefill-pp
    --mm-max-concurrent-calls --mm-per-request-timeout --speculative-ngram-branch-length
    --speculative-ngram-max-match-window-size --speculative-ngram-min-match-window-size
    --disaggregation-decode-enable-fake-auto
    --dllm-block-size --enable-flashinfer-autotune --load-watch-interval --oltp-traces-endpoint
    --max-micro-batch-size --debug-tensor-dump-prefill-only --pdlb-url
    """
)
#: an older release's spelling of a planned flag -> its planned spelling, from the ``ServerArgs`` renames
#: (``--mamba-scheduler-strategy``: 0.5.13's flag, a deprecated alias of ``--mamba-radix-cache-strategy`` in 0.5.14;
#: the renamed DSA backend flags are refused either way)
OLDER_RENAMED: dict[str, str] = {
    "--" + old.replace("_", "-"): "--" + new.replace("_", "-")
    for new, old in RENAMED_SERVER_ARGUMENTS
    if "--" + new.replace("_", "-") in MODELLED
}
