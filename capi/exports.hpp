// The library is built with hidden visibility; only cuFile's entry points carry this (and the
// version script libsluice_cufile.map lists them again, so nothing else leaks by accident).
#pragma once

#define CUFILE_API extern "C" __attribute__((visibility("default")))
