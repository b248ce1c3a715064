// fbt/train/config.hpp: a training run's config and everything that reads, writes and checks it (the files
// train/train_config.hpp lists).
#pragma once

#include "config_fields.hpp"
#include "config_file.hpp"
#include "config_validate.hpp"
#include "config_values.hpp"
#include "data_config.hpp"
#include "presets.hpp"
#include "train_config.hpp"
