// src/session.cpp: fbt/session.hpp's functions compiled once into fbt::runtime (the trainer, the decoder, the
// checkpoints for Model<float>, and the gradient check for Model<double>, each with its pieces erased at their
// slots): a program that links fbt::runtime includes fbt/session.hpp's declarations only. Its own translation
// unit, so that it compiles beside src/runtime.cpp.
#define FBT_BUILDING_RUNTIME 1
#include "fbt/session.hpp"
