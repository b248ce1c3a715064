#!/usr/bin/env bash
# tests/scripts/train_signal.sh FBT DIR: `fbt train` under SIGTERM and beside another run on its out_dir.
#   1. a run interrupted by SIGTERM at a random step exits with status 143 after writing a checkpoint, and
#      resumed from it ends with the same checkpoint files, byte for byte, as the same run uninterrupted
#      (constant LR, no warmup, feedback from step 0: no step's math depends on where the run stops);
#   2. a second run on an out_dir in use is refused, naming the process that holds it;
#   3. a checkpoint's temporary directory left by a process that no longer exists is removed by the next
#      save; a live process's is kept;
#   4. SIGTERM after the last step (during the final evaluation) interrupts the evaluation at a window boundary
#      and exits 0 with a line saying the run is complete (it exited 143 with no line: a scheduler requeued it).
set -u
fbt=$1
dir=$2
fail() { echo "FAIL: $*"; for f in "$dir"/*.err; do echo "--- $f"; tail -5 "$f"; done; exit 1; }
rm -rf "$dir" && mkdir -p "$dir" || exit 2
steps=3000
args=(--hidden_size 32 --num_hidden_layers 2 --num_attention_heads 2 --num_key_value_heads 1 --intermediate_size 64 --seq_len 32 --batch_size 4
      --eval_windows 2 --seq_eval_windows 1 --monitor_passes 3 --task_difficulty 2 --progress false --steps $steps --lr_schedule constant
      --warmup_steps 0 --feedback_start 0 --eval_every 0 --checkpoint_every 0 --out_dir "$dir/run")

"$fbt" train "${args[@]}" >/dev/null 2>"$dir/full.err" || fail "the uninterrupted run failed"
mv "$dir/run" "$dir/full"

# the interrupted run: SIGTERM once it has logged a random number of steps
"$fbt" train "${args[@]}" >/dev/null 2>"$dir/interrupted.err" &
pid=$!
target=$((RANDOM % 300 + 5))
for _ in $(seq 1 600); do
  [ -f "$dir/run/train.jsonl" ] && [ "$(wc -l <"$dir/run/train.jsonl")" -ge "$target" ] && break
  sleep 0.05
done
# item 2: the out_dir is held; a second run names the holder
"$fbt" train "${args[@]}" >/dev/null 2>"$dir/second.err"
rc2=$?
kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc2" -eq 1 ] || fail "a second run on the same out_dir: exit status $rc2, expected 1"
grep -q "out_dir '.*run' is in use by another run (process $pid holds its lock file run.lock)" "$dir/second.err" || fail "the second run's message"
[ "$(wc -l <"$dir/second.err")" -eq 1 ] || fail "the second run's refusal is not one line"
[ "$rc" -eq 143 ] || fail "exit status $rc after SIGTERM, expected 143"
grep -q "SIGTERM: stopped after step [0-9]* of $steps; checkpoint in" "$dir/interrupted.err" || fail "no stop line"
stopped=$(grep -o "stopped after step [0-9]*" "$dir/interrupted.err" | grep -o "[0-9]*$")
echo "signalled after >= $target logged steps; stopped after step $stopped of $steps"
[ "$stopped" -lt "$steps" ] || fail "the run ended before the signal"

# item 3: a dead process's temporary checkpoint directory goes, a live one's stays
mkdir -p "$dir/run/checkpoint.tmp.999999999" "$dir/run/checkpoint.tmp.$$"
"$fbt" train --resume "$dir/run/checkpoint" >/dev/null 2>"$dir/resume.err" || fail "the resumed run failed"
[ ! -e "$dir/run/checkpoint.tmp.999999999" ] || fail "a dead process's checkpoint.tmp.<pid> was left"
[ -d "$dir/run/checkpoint.tmp.$$" ] || fail "a live process's checkpoint.tmp.<pid> was removed"
for f in model.safetensors train_state.safetensors; do
  cmp "$dir/full/checkpoint/$f" "$dir/run/checkpoint/$f" || fail "$f differs from the uninterrupted run's"
done
# item 4: the signal during the last step or the final evaluation (a long one: every window, token by token)
fin=(--hidden_size 128 --num_hidden_layers 2 --num_attention_heads 4 --num_key_value_heads 2 --intermediate_size 256 --seq_len 256
     --batch_size 2 --eval_windows 0 --seq_eval_windows -1 --monitor_passes 0 --task_difficulty 2 --progress false --steps 2
     --eval_every 0 --checkpoint_every 0 --feedback_start 0 --out_dir "$dir/final")
"$fbt" train "${fin[@]}" >/dev/null 2>"$dir/final.err" &
pid=$!
for _ in $(seq 1 600); do
  [ -f "$dir/final/train.jsonl" ] && [ "$(wc -l <"$dir/final/train.jsonl")" -ge 1 ] && break
  sleep 0.05
done
sleep 0.5
t0=$(date +%s%N)
kill -TERM "$pid"
wait "$pid"
rc=$?
waited=$((($(date +%s%N) - t0) / 1000000))
[ "$rc" -eq 0 ] || fail "exit status $rc after SIGTERM during the final evaluation, expected 0 (the run is complete)"
grep -q "SIGTERM after the last step (2 of 2): the run is complete, checkpoint in .*its final evaluation was interrupted" "$dir/final.err" ||
  fail "no line saying the run is complete and its final evaluation interrupted"
[ -f "$dir/final/checkpoint/model.safetensors" ] || fail "no checkpoint after the last step"
[ ! -s "$dir/final/eval.jsonl" ] || fail "an interrupted evaluation was recorded"
echo "final evaluation interrupted: the process ended ${waited} ms after SIGTERM"
echo "PASS: stopped at step $stopped by SIGTERM (status 143), resumed, checkpoint files identical to the uninterrupted run's; SIGTERM in the final evaluation: status 0, run complete"
