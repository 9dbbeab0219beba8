#!/usr/bin/env bash
# Per-rank model-state bytes and communication per step for DDP, every ZeRO stage and FSDP
# strategy, at 2 and 4 ranks, measured in real runs (fp32 AdamW, the small GPT of the sharding
# tests: Psi = 34,688 parameters) next to `shardscope estimate-memory` for the same model.
# Prints Markdown for docs/SHARDING.md.
#
#   ./scripts/sharding-table.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
shardscope_measure_setup
cat > "$work/r.yaml" <<'EOF'
name: shard-table
seed: 11
model: {type: gpt, n_layer: 2, n_embd: 32, n_head: 4, block_size: 32}
data: {type: text}
optimizer: {type: adamw, lr: 0.003}
training: {per_device_batch_size: 2, max_steps: 3}
EOF
psi=34688

echo "Model: GPT, 2 blocks, n_embd 32 (Psi = $psi parameters, fp32, AdamW). Bytes per rank of step 3's"
echo "step event: 'kept' is what the layout holds (mem.params, mem.grads), 'peak' adds what the step"
echo "holds for a moment (mem.peak_params, mem.peak_grads); 'estimate' is shardscope estimate-memory."
echo "Communication volume per step: all-gather + reduce-scatter + 2 x all-reduce bytes (an all-reduce"
echo "is a reduce-scatter plus an all-gather), relative to DDP's."
echo
echo "| ranks | strategy | params kept | peak | estimate | grads kept | peak | estimate | optimizer measured | estimate | comm volume / DDP |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
row_of() { # events.jsonl -> "params peak grads peak optimizer volume" of rank 0's last step
  python3 - "$1" <<'EOF'
import json, sys
step = [e for e in map(json.loads, open(sys.argv[1])) if e["type"] == "step" and e["rank"] == 0][-1]
m, c = step["mem"], step["comm"]
print(m["params"], m["peak_params"], m["grads"], m["peak_grads"], m["optimizer"],
      c["all_gather"] + c["reduce_scatter"] + 2 * c["all_reduce"])
EOF
}
for n in 2 4; do
  estimates=$("$bin" estimate-memory --params $psi --num_processes $n --precision no --all_stages --markdown)
  [ $n = 2 ] && estimates2=$estimates
  ddp_volume=""
  for entry in "ddp::0" "ZeRO-1:--zero_stage 1:1" "ZeRO-2:--zero_stage 2:2" "ZeRO-3:--zero_stage 3:3" \
               "FSDP FULL_SHARD:--fsdp_sharding_strategy FULL_SHARD --fsdp_auto_wrap_policy TRANSFORMER_BASED_WRAP:FULL_SHARD" \
               "FSDP SHARD_GRAD_OP:--fsdp_sharding_strategy SHARD_GRAD_OP --fsdp_auto_wrap_policy TRANSFORMER_BASED_WRAP:SHARD_GRAD_OP"; do
    name=${entry%%:*}; rest=${entry#*:}; args=${rest%:*}; stage=${rest##*:}
    run="r$n-$RANDOM"
    # shellcheck disable=SC2086
    "$bin" launch --num_processes $n --recipe "$work/r.yaml" --runs_dir "$work/runs" --run_name "$run" -- $args >/dev/null
    read -r p pp g gp o v <<<"$(row_of "$work/runs/$run/events.jsonl")"
    [ -n "$ddp_volume" ] || ddp_volume=$v
    if [ "${stage#[0-3]}" = "$stage" ]; then # an FSDP strategy: the estimate of an FSDP config asking for it
      printf 'distributed_type: FSDP\nnum_processes: %s\nfsdp_config:\n  fsdp_sharding_strategy: %s\n' "$n" "$stage" \
        > "$work/fsdp.yaml"
      est=$("$bin" estimate-memory --config_file "$work/fsdp.yaml" --params $psi --precision no --markdown \
        | grep -F "| FSDP1 $stage | fp32 |" | head -1)
    else
      label="ZeRO-$stage"; [ "$stage" = 0 ] && label="DDP (ZeRO-0)"
      est=$(grep -F "| $label | fp32 |" <<<"$estimates" | head -1)
    fi
    ep=$(cut -d'|' -f4 <<<"$est" | xargs); eg=$(cut -d'|' -f5 <<<"$est" | xargs); eo=$(cut -d'|' -f6 <<<"$est" | xargs)
    printf '| %s | %s | %s B | %s B | %s | %s B | %s B | %s | %s B | %s | %.2f |\n' "$n" "$name" "$p" "$pp" "$ep" "$g" "$gp" \
      "$eg" "$o" "$eo" \
      "$(echo "$v / $ddp_volume" | bc -l)"
  done
done

# HYBRID_SHARD at 4 ranks as 2 machines x 2 ranks: two launchers on this host. Sharded over a
# machine's 2 ranks, so its estimate is ZeRO-3's at 2; the volume adds the all-reduce of the
# gradient shards between the machines.
port=$(python3 -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])")
for m in 1 0; do
  "$bin" launch --num_processes 4 --num_machines 2 --machine_rank $m --main_process_port "$port" --recipe "$work/r.yaml" \
    --runs_dir "$work/machine$m" --run_name hybrid -- --fsdp_sharding_strategy HYBRID_SHARD >/dev/null &
done
wait
read -r p pp g gp o v <<<"$(row_of "$work/machine0/hybrid/events.jsonl")"
est=$(grep -F "| ZeRO-3 | fp32 |" <<<"$estimates2" | head -1)
ep=$(cut -d'|' -f4 <<<"$est" | xargs); eg=$(cut -d'|' -f5 <<<"$est" | xargs); eo=$(cut -d'|' -f6 <<<"$est" | xargs)
printf '| 4 (2 x 2) | FSDP HYBRID_SHARD | %s B | %s B | %s | %s B | %s B | %s | %s B | %s | %.2f |\n' "$p" "$pp" "$ep" "$g" \
  "$gp" "$eg" "$o" "$eo" \
  "$(echo "$v / $ddp_volume" | bc -l)"
