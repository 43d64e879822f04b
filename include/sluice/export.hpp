// SLUICE_API marks what libsluice and libsluice_tools export. Both are built with hidden
// visibility (-fvisibility=hidden, -fvisibility-inlines-hidden), so a class or function without
// it stays inside its library, whatever header declares it. On a class it exports the members
// defined out of line, the vtable and the typeinfo (which exceptions and dynamic_cast need across
// libraries); inline members stay hidden and are compiled into each user. On ELF the same
// attribute serves the library that defines a symbol and the programs that use it. The version
// script src/libsluice.map keeps the rest in (standard library template instantiations), and
// tests/api/check-exports.sh (ctest label api) checks what the libraries export.
#pragma once

#define SLUICE_API __attribute__((visibility("default")))

// SLUICE_LOCAL keeps a nested class of a SLUICE_API class inside the library (a class inherits
// its enclosing class's visibility): a private implementation (`struct SLUICE_LOCAL Impl;`)
// whose members, defined out of line, would otherwise all be exported.
#define SLUICE_LOCAL __attribute__((visibility("hidden")))
