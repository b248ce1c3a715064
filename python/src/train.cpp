// The training part of fbt._fbt: fbt.train, fbt.evaluate, fbt.probe (fbt/python/train.hpp) and a custom loop's
// multipass_step, optimizers and gradients (fbt/python/step.hpp).
#include "fbt/python.hpp"
#include "fbt/python/step.hpp"
#include "fbt/python/train.hpp"

FBT_PYTHON_PART(train, m) {
  fbt::python::bind_train(m);
  fbt::python::bind_step(m);
}
