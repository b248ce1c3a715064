#!/usr/bin/env bash
# tests/scripts/plugin.sh FBT PLUGIN BAD_ABI_PLUGIN NOT_A_PLUGIN DIR: the stock `fbt` command with a plugin
# (examples/own_project/plugin.cpp: fuser lowrank, block gated_attn, policy soft_first, optimizer sgdm), through
# every subcommand, and the plugin refusals:
#   1. train with the plugin's fuser, block and optimizer; the same run stopped at step 3 and resumed to step 6
#      ends with the same weights, byte for byte (constant LR, feedback from step 0);
#   2. eval; sample in standard, soft, fused(2) and the plugin's soft_first(2); probe; logits; export (a lowrank
#      run on the decoder block: Hugging Face's layers are that block's);
#   3. ablate over --vary fuser=glu|lowrank;
#   4. without --plugin, a checkpoint of the plugin's fuser is refused naming the fuser, the plugin's file and
#      the flag; a plugin built against another plugin interface (FBT_PLUGIN_ABI_REVISION 999) and a shared object
#      that is no plugin are refused naming the file, with exit status 1 and one line.
set -u
fbt=$1 plugin=$2 bad=$3 notplugin=$4 dir=$5
fail() { echo "FAIL: $*"; for f in "$dir"/*.err; do [ -f "$f" ] && { echo "--- $f"; tail -5 "$f"; }; done; exit 1; }
rm -rf "$dir" && mkdir -p "$dir" || exit 2
tiny=(--hidden_size 32 --num_hidden_layers 2 --num_attention_heads 2 --num_key_value_heads 1 --intermediate_size 64 --seq_len 32 --batch_size 4
      --eval_windows 2 --seq_eval_windows 1 --monitor_passes 3 --task_difficulty 2 --progress false --lr_schedule constant --warmup_steps 0
      --feedback_start 0 --eval_every 0 --checkpoint_every 0)
pieces=(--fuser lowrank --fuser.rank 4 --block gated_attn --block.gate_init 0.7 --optimizer sgdm --optimizer.momentum 0.8 --lr 0.01)
run() {  # run NAME ARGS...: the command's output in DIR/NAME.err, its status returned
  local name=$1
  shift
  "$fbt" "$@" >"$dir/$name.out" 2>"$dir/$name.err"
}

# 1. train and resume
run train train --plugin "$plugin" "${tiny[@]}" "${pieces[@]}" --steps 6 --out_dir "$dir/full" || fail "train with the plugin's pieces"
grep -q "eval @ step 6" "$dir/train.err" || fail "train: no evaluation at step 6"
run part train --plugin "$plugin" "${tiny[@]}" "${pieces[@]}" --steps 3 --out_dir "$dir/part" || fail "the 3-step run"
run resume train --plugin "$plugin" --resume "$dir/part/checkpoint" --steps 6 --out_dir "$dir/part" || fail "resume with the plugin"
cmp -s "$dir/full/checkpoint/model.safetensors" "$dir/part/checkpoint/model.safetensors" || fail "3 steps + resume + 3 differs from 6 steps"
ck="$dir/full/checkpoint"

# 2. every other subcommand on the plugin's model
run eval eval --plugin "$plugin" --checkpoint "$ck" --data task:addition --task_difficulty 2 --seq_len 32 --windows 2 --seq_windows 1 --monitor 3 ||
  fail "eval"
grep -q "pass 3 validation loss" "$dir/eval.err" "$dir/eval.out" || fail "eval: no pass-3 loss"
for mode in standard soft "fused(2)" "soft_first(2)"; do
  run sample sample --plugin "$plugin" --checkpoint "$ck" --prompt "12+34=?" "--mode=$mode" --max_new_tokens 6 --temperature 0 || fail "sample --mode $mode"
  grep -qF "sample 1 ($mode" "$dir/sample.out" "$dir/sample.err" || fail "sample --mode $mode: no sample line"
done
run probe probe --plugin "$plugin" --checkpoint "$ck" --task delayed_memory --groups 8 || fail "probe"
grep -q "chance" "$dir/probe.out" "$dir/probe.err" || fail "probe: no table"
run logits logits --plugin "$plugin" --checkpoint "$ck" --text "12+34=?" --out "$dir/logits.npy" || fail "logits"
run export_train train --plugin "$plugin" "${tiny[@]}" --fuser lowrank --fuser.rank 4 --steps 2 --out_dir "$dir/dec" || fail "train lowrank on decoder blocks"
run export export --plugin "$plugin" --checkpoint "$dir/dec/checkpoint" --hf "$dir/hf" || fail "export"
grep -q "the feedback tensors of a user's fuser" "$dir/export.out" || fail "export: not the user fuser's Qwen3 form with its feedback tensors"
run sample_hf sample --plugin "$plugin" --checkpoint "$dir/hf" --prompt "1+2=?" --temperature 0 --max_new_tokens 4 || fail "sample the exported directory"

# 3. a grid over the plugin's fuser and a built-in one
run ablate ablate --plugin "$plugin" --vary "fuser=glu|lowrank" --hidden_size 32 --num_hidden_layers 2 --num_attention_heads 2 --num_key_value_heads 1 \
  --intermediate_size 64 --seq_len 32 --batch_size 4 --tokens 4096 --task_examples 4 --task_lengths 1 --decode_timing 0 --out_dir "$dir/grid" || fail "ablate"
[ -f "$dir/grid/fuser=lowrank+seed=1/result.json" ] && [ -f "$dir/grid/fuser=glu+seed=1/result.json" ] || fail "ablate: a run's result.json is missing"

# 4. refusals: one line, exit status 1
refused() {  # refused NAME PATTERN ARGS...
  local name=$1 pat=$2
  shift 2
  run "$name" "$@" && fail "$name: exit status 0"
  [ "$(wc -l <"$dir/$name.err")" -eq 1 ] || fail "$name: the refusal is not one line"
  grep -qE "$pat" "$dir/$name.err" || fail "$name: the message does not match /$pat/"
}
refused no_plugin 'unknown fuser "lowrank".*made with plugin liblowrank.so.*--plugin' sample --checkpoint "$ck" --prompt x --max_new_tokens 1
refused no_plugin_train 'unknown fuser "lowrank".*--plugin' train "${tiny[@]}" --fuser lowrank --steps 1 --out_dir "$dir/x"
refused bad_abi "plugin '.*libbad_abi_plugin.so': built for another fbt \(its ABI tag is \".*plugin interface 999" train --plugin "$bad" --help
refused not_plugin "plugin '.*': (not an fbt plugin|cannot load it)" train --plugin "$notplugin" --help
refused no_file "plugin '.*no_such.so': no such file" train --plugin "$dir/no_such.so" --help
echo "plugin: train, resume (bit-identical), eval, sample in 4 modes, probe, logits, export, ablate; 5 refusals"
