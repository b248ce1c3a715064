// fbt/python/train.hpp: the training half of fbt's Python module (docs/python.md, "Training"):
//   fbt.train(config=None, callback=None, verbose=True, **fields)   the `fbt train` command (cli/train.hpp
//       run_train: the same config, presets, data, run directory and trainer), a callback after every step
//   fbt.StepReport, fbt.TrainResult                                  what the callback and train() get
// Keyword values become the command's flag text (bool -> true/false, numbers by repr, lists joined by
// commas, dicts as JSON), so `fbt.train(steps=20, data="task:running_sum")` is `fbt train --steps 20 --data
// task:running_sum` and trains bit for bit the same weights. The GIL is released while the trainer runs and
// taken back for the callback; Ctrl-C (Python's SIGINT flag, checked after every step; without a callback
// every 20 ms at most, in the main thread only: InterruptCheck) and an exception in
// the callback stop the run the way a stop signal stops the command: the step under way finishes, its
// checkpoint is written, then the exception reaches the caller.
//   fbt.evaluate(checkpoint, ...)   a run's evaluation (Trainer::evaluate) as the dict eval.jsonl holds
//   fbt.probe(checkpoint=..., ...)  the `fbt probe` command (cli/probe.hpp), its --out JSON as a dict
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "../cli/probe.hpp"
#include "config.hpp"
#include "../cli/train.hpp"
#include "../train/run_plan.hpp"

namespace fbt {
namespace python {

namespace nb = nanobind;

/// What fbt.train returns: the run's directory and checkpoint, its steps and the last step's losses.
struct TrainResult {
  std::string out_dir;             ///< the run's directory (train.jsonl, eval.jsonl, checkpoint/)
  std::string checkpoint;          ///< out_dir/checkpoint: fbt.Model.load and fbt.train(resume=...) read it
  long step = 0;                   ///< optimizer steps taken
  long steps = 0;                  ///< the run's configured steps
  std::vector<double> loss;        ///< (K) the last step's loss of each pass
  bool stopped = false;            ///< the callback returned False before the last step
};

namespace detail {
/// \brief A keyword's value as the text of the command's flag --name: bool "true"/"false", int and float
/// by Python's repr (which reads back exactly), str and os.PathLike as they are, a list or tuple joined by
/// commas (per-layer lists, eval_lengths), a dict as JSON (fuser_options). Anything else: TypeError
/// naming the keyword.
inline std::string flag_text(const std::string& name, nb::handle given) {
  nb::object held = plain_number(given);  // np.float64(3e-3) is "0.003", np.int64(10) is "10"
  if (nb::hasattr(held, "tolist") && nb::hasattr(held, "ndim") && nb::cast<int>(held.attr("ndim")) == 1) held = held.attr("tolist")();  // a 1-d array is a list
  nb::handle v = held;
  if (nb::isinstance<nb::bool_>(v)) return nb::cast<bool>(v) ? "true" : "false";
  if (nb::isinstance<nb::int_>(v) || nb::isinstance<nb::float_>(v)) return nb::cast<std::string>(nb::repr(v));
  if (nb::isinstance<nb::str>(v)) return nb::cast<std::string>(v);
  if (nb::hasattr(v, "__fspath__")) return nb::cast<std::string>(nb::module_::import_("os").attr("fspath")(v));
  if (nb::isinstance<nb::list>(v) || nb::isinstance<nb::tuple>(v)) {
    std::string s;
    for (nb::handle x : v) {
      nb::object px = plain_number(x);
      if (!(nb::isinstance<nb::int_>(px) || nb::isinstance<nb::float_>(px) || nb::isinstance<nb::str>(px)) || nb::isinstance<nb::bool_>(px))
        throw nb::type_error(("fbt.train: " + name + ": a list's items must be numbers or strings, got " +
                              nb::cast<std::string>(nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(x.ptr())))))).c_str());
      s += (s.empty() ? "" : ",") + flag_text(name, px);
    }
    return s;
  }
  if (nb::isinstance<nb::dict>(v)) return nb::cast<std::string>(nb::module_::import_("json").attr("dumps")(v, "default"_a = nb::cpp_function(json_number)));
  throw nb::type_error(("fbt.train: " + name + " must be a bool, number, string, path, list or dict, got " +
                        nb::cast<std::string>(nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(v.ptr())))))).c_str());
}

/// The command's options from fbt.train's arguments: config (a JSON file's path, as --config, or a dict of
/// fields), then the keywords (which win over the dict's fields, as flags win over a config file).
inline cli::Args train_args(nb::handle config, const nb::kwargs& kw) {
  cli::Args a;
  auto add = [&](const std::string& k, nb::handle v) {
    if (v.is_none()) return;  // None: the field's default
    if (nb::isinstance<nb::str>(v))  // typed as a config file's values: {"steps": "3"} is refused, not read as 3
      for (const auto& f : train_config_fields())
        if (f.name == k && (f.kind == ConfigField::Kind::integer || f.kind == ConfigField::Kind::real || f.kind == ConfigField::Kind::boolean))
          throw nb::type_error(("fbt.train: " + fbt::detail::excerpt(k) + " must be " + (f.kind == ConfigField::Kind::boolean ? "a bool" : "a number") +
                                ", got the string " + fbt::detail::quote_value(nb::cast<std::string>(v)))
                                   .c_str());
    for (auto& kv : a)
      if (kv.first == k) {
        kv.second = flag_text(k, v);
        return;
      }
    a.push_back({k, flag_text(k, v)});
  };
  if (nb::isinstance<nb::dict>(config)) {
    for (auto [k, v] : nb::borrow<nb::dict>(config)) add(nb::cast<std::string>(nb::str(k)), v);
  } else if (!config.is_none()) {
    if (!(nb::isinstance<nb::str>(config) || nb::hasattr(config, "__fspath__")))
      throw nb::type_error("fbt.train: config must be None, a dict of fields or the path of a JSON config file");
    add("config", config);
  }
  for (auto [k, v] : kw) add(nb::cast<std::string>(k), v);
  return a;
}
/// The keywords as the options of a command (fbt.probe): each keyword is the flag of that name.
inline cli::Args command_args(const nb::kwargs& kw) {
  cli::Args a;
  for (auto [k, v] : kw)
    if (!v.is_none()) a.push_back({nb::cast<std::string>(k), flag_text(nb::cast<std::string>(k), v)});
  return a;
}
}  // namespace detail

/// \brief Adds fbt.train, fbt.StepReport and fbt.TrainResult to module `m`, over every fuser and block this
/// process knows (the registries: the library's and a loaded plugin's).
inline void bind_train(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<StepReport>(m, "StepReport", "One training step as the callback of fbt.train sees it (the line train.jsonl gets).")
      .def_ro("step", &StepReport::step, "the step just taken (0-based)")
      .def_ro("K", &StepReport::K, "the passes the schedule drew for it")
      .def_ro("loss", &StepReport::loss, "(K) the loss of each pass, pass 1 first (mean over micro-batches)")
      .def_ro("lr", &StepReport::lr, "the learning rate of the step")
      .def_ro("grad_norm", &StepReport::grad_norm, "the global gradient norm before clipping")
      .def_ro("seconds", &StepReport::seconds, "the step's wall time")
      .def_prop_ro(
          "record", [](const StepReport& r) { return json_to_py(r.record); },
          "the whole line train.jsonl gets for this step, as a dict: step, tokens, compute_tokens, K, loss, lr, grad_norm, tok_s,\n"
          "optimizer_seconds, and where they apply matrix_lr, comm_seconds, state_rms, gate_mean, gate_std, feedback_ratio")
      .def("__getattr__",
           [](const StepReport& r, const std::string& name) -> nb::object {
             if (r.record.is_object() && r.record.contains(name)) return json_to_py(r.record[name]);
             std::string known;
             if (r.record.is_object())
               for (auto it = r.record.begin(); it != r.record.end(); ++it) known += (known.empty() ? "" : ", ") + it.key();
             throw nb::attribute_error(("StepReport has no field '" + name + "' (this step's train.jsonl fields: " +
                                        (known.empty() ? std::string("none") : known) + ")").c_str());
           },
           "name"_a, "Any train.jsonl field of the step as an attribute (report.tok_s, report.gate_mean, ...).")
      .def("__repr__", [](const StepReport& r) {
        std::string s = "StepReport(step=" + std::to_string(r.step) + ", K=" + std::to_string(r.K) + ", loss=[";
        for (std::size_t i = 0; i < r.loss.size(); ++i) s += (i ? ", " : "") + fbt::detail::num(r.loss[i]);
        return s + "])";
      });
  nb::class_<TrainResult>(m, "TrainResult", "What fbt.train returns.")
      .def_ro("out_dir", &TrainResult::out_dir, "the run's directory (train.jsonl, eval.jsonl, checkpoint/)")
      .def_ro("checkpoint", &TrainResult::checkpoint, "out_dir/checkpoint (fbt.Model.load, fbt.train(resume=...))")
      .def_ro("step", &TrainResult::step, "optimizer steps taken")
      .def_ro("steps", &TrainResult::steps, "the run's configured steps")
      .def_ro("loss", &TrainResult::loss, "(K) the last step's loss of each pass")
      .def_ro("stopped", &TrainResult::stopped, "True when the callback returned False before the last step")
      .def("__repr__", [](const TrainResult& r) {
        return "TrainResult(out_dir='" + r.out_dir + "', step=" + std::to_string(r.step) + "/" + std::to_string(r.steps) +
               (r.stopped ? ", stopped" : "") + ")";
      });
  m.def(
      "train",
      [](nb::object config, nb::object callback, nb::object on_eval, bool verbose, nb::kwargs kw) {
        cli::Args a = detail::train_args(config, kw);
        if (!callback.is_none() && !PyCallable_Check(callback.ptr())) throw nb::type_error("fbt.train: callback must be callable (step, report) or None");
        if (!on_eval.is_none() && !PyCallable_Check(on_eval.ptr())) throw nb::type_error("fbt.train: on_eval must be callable (step, record) or None");
        std::exception_ptr failure;  // the callback's exception or KeyboardInterrupt, raised once the checkpoint is written
        cli::TrainHooks h;
        h.stop_handlers = false;  // Python keeps its own SIGINT handler: its flag is checked after every step
        h.out = verbose ? stderr : nullptr;
        InterruptCheck interrupt;  // without a callback: Ctrl-C checked in the main thread only, every 20 ms at most
        h.on_step = [&](const StepReport& r) {
          if (failure) return false;  // on_eval raised at the last evaluation: stop here, with a checkpoint
          if (callback.is_none()) {  // no Python to run: the GIL only for the Ctrl-C check
            try {
              interrupt();
            } catch (...) {
              failure = std::current_exception();
              return false;
            }
            return true;
          }
          nb::gil_scoped_acquire gil;
          try {
            if (PyErr_CheckSignals() != 0) throw nb::python_error();
            nb::object go_on = callback(r.step, r);
            if (go_on.is(nb::bool_(false))) return false;
          } catch (...) {
            failure = std::current_exception();
            return false;
          }
          return true;
        };
        if (!on_eval.is_none())
          h.on_eval = [&](const nlohmann::json& e) {  // an evaluation: its eval.jsonl line; an exception stops the run at this step
            if (failure) return;
            nb::gil_scoped_acquire gil;
            try {
              on_eval(e.value("step", 0L), json_to_py(e));
            } catch (...) {
              failure = std::current_exception();
            }
          };
        cli::TrainOutcome o;
        {
          nb::gil_scoped_release nogil;
          cli::CommandState st;  // this call's own: the run's progress, its memory estimate
          o = cli::run_train(st, std::move(a), h);
        }
        if (failure) std::rethrow_exception(failure);
        TrainResult r;
        r.out_dir = o.out_dir, r.checkpoint = o.out_dir + "/checkpoint", r.step = o.step, r.steps = o.steps, r.loss = o.loss;
        r.stopped = o.stopped_by_observer && o.step < o.steps;
        return r;
      },
      "config"_a = nb::none(), "callback"_a = nb::none(), "on_eval"_a = nb::none(), "verbose"_a = true, "fields"_a,
      "train(config=None, callback=None, on_eval=None, verbose=True, **fields) -> TrainResult\n\n"
      "Runs the library's trainer exactly as `fbt train` does (presets, tasks, token and text files, out_dir,\n"
      "resume): each keyword is the command's flag of that name (`fbt train --help` lists them), e.g.\n"
      "fbt.train(preset='v1', data='task:running_sum', steps=20, out_dir='runs/rs'). config: the path of a JSON\n"
      "config file (--config) or a dict of fields (keywords win over it; options of a piece as 'fuser.rank').\n"
      "resume='runs/rs/checkpoint' continues a run bit for bit (then only steps, cadence and output may change).\n"
      "callback(step, report) runs after every step (report: fbt.StepReport, report.loss = per-pass losses, report.record =\n"
      "the step's whole train.jsonl line, each field also an attribute: report.tok_s, report.gate_mean, ...);\n"
      "on_eval(step, record) after every evaluation (record: the dict eval.jsonl gets);\n"
      "returning False stops the run with a checkpoint of that step; an exception (and Ctrl-C) stops it the same\n"
      "way and is raised after the checkpoint is written. verbose=False silences the progress lines.\n"
      "Raises ValueError (fbt.Error) for a bad field, naming it.");

  m.def(
      "evaluate",
      [](const std::string& checkpoint, nb::object eval_windows, nb::object seq_eval_windows, nb::object monitor_passes) {
        nlohmann::json j;
        {
          std::vector<std::pair<std::string, std::string>> set;  // the evaluation's cadence fields a resumed run may change
          auto opt = [&](const char* name, const nb::object& v) {
            if (!v.is_none()) set.push_back({name, detail::flag_text(name, v)});
          };
          opt("eval_windows", eval_windows), opt("seq_eval_windows", seq_eval_windows), opt("monitor_passes", monitor_passes);
          nb::gil_scoped_release nogil;
          const TrainConfig rec = read_train_config(checkpoint);
          with_model<float>(rec.model, [&](auto tag) {
            using M = typename decltype(tag)::type;
            auto t = Trainer<M>::resume(checkpoint, [&](TrainConfig& c) {
              for (const auto& [k, v] : set) set_config_field(c, k, v);
            });
            const EvalReport e = t->evaluate();
            j = eval_losses_json(e);
            j["step"] = e.step, j["tokens"] = e.tokens, j["compute_tokens"] = t->compute_tokens;
          });
        }
        return nb::borrow<nb::dict>(nb::module_::import_("json").attr("loads")(j.dump()));
      },
      "checkpoint"_a, "eval_windows"_a = nb::none(), "seq_eval_windows"_a = nb::none(), "monitor_passes"_a = nb::none(),
      "evaluate(checkpoint, eval_windows=None, seq_eval_windows=None, monitor_passes=None) -> dict\n\n"
      "The evaluation a training run makes (Trainer::evaluate), of the checkpoint directory a run of fbt train\n"
      "or fbt.train wrote, on that run's data: the dict the run's eval.jsonl holds (val_loss per pass,\n"
      "seq_loss_standard, seq_loss_soft, optimal_loss, seq_optimal_loss where known, contraction {loss, delta},\n"
      "loss_by_position, step, tokens, compute_tokens). The evaluation's sizes default to the run's own;\n"
      "the run's last line of eval.jsonl is this function's result for its final checkpoint, number for number.");

  nb::class_<RunPlan>(m, "RunPlan",
                      "A run's draws step by step without its model (train/run_plan.hpp): what fbt.data iterates. Built from the fields\n"
                      "fbt.train takes (config: a dict of fields or a JSON file's path, then the keywords), so the same fields list the\n"
                      "batches, passes and rates that fbt.train(...) trains on.")
      .def("__init__",
           [](RunPlan* self, nb::object config, nb::kwargs kw) {
             cli::Args a = detail::train_args(config, kw);
             std::string file;
             for (auto it = a.begin(); it != a.end(); ++it)
               if (it->first == "config") {
                 file = it->second;
                 a.erase(it);
                 break;
               }
             try {
               nb::gil_scoped_release nogil;
               const TrainConfig c = make_train_config(file, a, [](const std::string& ck) { return cli::checkpoint_config_any_vocab(ck); });
               new (self) RunPlan(c);
             } catch (const Error& e) {
               value_error(e.what());
             }
           },
           "config"_a = nb::none(), "kw"_a)
      .def_prop_ro("steps", [](const RunPlan& p) { return p.config().steps; }, "the run's steps")
      .def_prop_ro("step", &RunPlan::step, "the step next() returns")
      .def_prop_ro("config", [](const RunPlan& p) { return json_to_py(to_json(p.config())); }, "the run's config as fbt.train would record it")
      .def_prop_ro("model_config", [](const RunPlan& p) { return p.config().model; }, "the run's model (fbt.Model(plan.model_config, seed) is its start)")
      .def_prop_ro("seed", [](const RunPlan& p) { return p.config().seed; }, "the run's seed (its model's initialisation and its generators)")
      .def_prop_ro("data", [](const RunPlan& p) { return p.data().describe(); }, "what the run reads")
      .def_prop_ro("num_eval_windows", [](const RunPlan& p) { return p.data().num_eval_windows(p.config().seq_len); },
                   "validation windows of seq_len tokens")
      .def(
          "eval_window",
          [](const RunPlan& p, int i) {
            const int T = p.config().seq_len, n = p.data().num_eval_windows(T);
            if (i < 0 || i >= n) value_error("eval_window: i must be in [0, " + std::to_string(n) + "), got " + std::to_string(i));
            std::vector<int> tok, tgt;
            std::vector<std::uint8_t> ds;
            p.data().eval_window(i, T, tok, tgt, ds);
            nb::dict d;
            const std::size_t n1 = tok.size();
            d["tokens"] = owned_array(std::move(tok), {n1});
            d["targets"] = owned_array(std::move(tgt), {n1});
            d["doc_starts"] = owned_array(std::move(ds), {n1});
            return d;
          },
          "i"_a, "Validation window i: tokens, targets (-1: no loss), doc_starts (T,) as the run's evaluation reads them.")
      .def(
          "next",
          [](RunPlan& p, bool with_batches) {
            if (p.done()) throw nb::stop_iteration();
            PlannedStep s;
            try {
              nb::gil_scoped_release nogil;
              s = p.next(with_batches);
            } catch (const Error& e) {
              value_error(e.what());
            }
            const std::size_t A = std::size_t(p.config().grad_accum), B = std::size_t(p.config().batch_size), T = std::size_t(p.config().seq_len);
            nb::dict d;
            d["step"] = s.step, d["K"] = s.K, d["lambda"] = s.lambda, d["lr"] = s.lr, d["z_loss"] = s.z_loss;
            d["matrix_lr"] = s.matrix_lr;
            const std::size_t K = std::size_t(s.K);
            d["prefix"] = owned_array(std::move(s.prefix), {K, B});
            if (with_batches) {
              d["tokens"] = owned_array(std::move(s.tokens), {A, B, T});
              d["targets"] = owned_array(std::move(s.targets), {A, B, T});
              d["doc_starts"] = owned_array(std::move(s.doc_start), {A, B, T});
            }
            return d;
          },
          "with_batches"_a = true,
          "The next step: step, K, lambda, lr, matrix_lr (0 under adamw), z_loss, prefix (K, B), and with_batches tokens, targets,\n"
          "doc_starts (grad_accum, B, T). StopIteration after the last step.");

  m.def(
      "task_examples",
      [](const std::string& task, int n, int difficulty, int length_mult, bool trace_tag, std::optional<std::uint64_t> seed) {
        TaskConfig tc;
        tc.name = task, tc.difficulty = difficulty, tc.trace_tag = trace_tag;
        if (n < 0 || n > 1000000) value_error("n: examples must be in [0, 1000000], got " + std::to_string(n));
        if (length_mult < 1 || length_mult > 64) value_error("length_mult: must be in [1, 64], got " + std::to_string(length_mult));
        std::vector<Example> ex;
        int max_solution = 0;
        try {
          tc.validate();
          ex = seed ? (trace_tag ? eval_examples_at_levels(tc, n, *seed, length_mult) : eval_examples(tc, n, *seed, length_mult))
                    : task_eval_examples(tc, n, length_mult);
          max_solution = max_solution_bytes(tc, length_mult);
        } catch (const Error& e) {
          value_error(e.what());
        }
        nb::list out;
        for (const auto& e : ex) {
          nb::dict d;
          d["prompt"] = e.prompt, d["solution"] = e.solution, d["answer"] = e.answer, d["level"] = e.level;
          d["max_solution_bytes"] = max_solution;
          out.append(d);
        }
        return out;
      },
      "task"_a, "n"_a = 100, "difficulty"_a = 4, "length_mult"_a = 1, "trace_tag"_a = false, "seed"_a = nb::none(),
      "task_examples(task, n=100, difficulty=4, length_mult=1, trace_tag=False, seed=None) -> list[dict]\n\n"
      "Examples of a reasoning task (data/tasks.hpp: addition, state_tracking, multihop): dicts with prompt (ending \"?\\n\"),\n"
      "solution, answer, level and max_solution_bytes (the decoding budget an evaluation gives). seed None: the problems\n"
      "`fbt eval` (and a run's task evaluation) scores, from the evaluation's seed; with trace_tag, n problems at every level.");

  m.def(
      "probe",
      [](nb::kwargs kw) {
        cli::Args a = detail::command_args(kw);
        cli::ProbeRun p;
        {
          nb::gil_scoped_release nogil;
          p = cli::probe_command(std::move(a));
          if (!p.out.empty()) cli::write_probe_json(p, p.out);
        }
        nlohmann::json j = p.json;
        j["table"] = p.table, j["notes"] = p.notes;
        return nb::borrow<nb::dict>(nb::module_::import_("json").attr("loads")(j.dump()));
      },
      "options"_a,
      "probe(checkpoint=..., items=... | task=..., prefill='standard,fused(1),recurrent', folds=4, l2=1, seed=1, out=None, ...) -> dict\n\n"
      "The `fbt probe` command (`fbt probe --help` lists its options; each keyword is the flag of that name, lists\n"
      "as [..] or 'a,b'): linear probes per (prefill, depth) of a checkpoint. Quiet: returns the JSON the command writes\n"
      "with --out (cells with mode, setting, depth, accuracy and its 95% interval, chance, ...) plus 'table' (the text\n"
      "the command prints: print(r['table'])) and 'notes' (what it says on stderr); out=PATH also writes the file.");
}

}  // namespace python
}  // namespace fbt
