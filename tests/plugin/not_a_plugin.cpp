// tests/plugin/not_a_plugin.cpp: a shared object that is no fbt plugin (no entry points), which
// `fbt --plugin` must refuse by name (tests/scripts/plugin.sh).
extern "C" int not_an_fbt_plugin() { return 1; }
