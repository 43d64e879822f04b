// File handle and buffer registration (the checks themselves are in state.cpp).
#include <new>

#include "exports.hpp"
#include "guarded.hpp"
#include "log.hpp"
#include "state.hpp"

using namespace sluice::capi;  // NOLINT(google-build-using-namespace): the C entry points below

CUFILE_API CUfileError_t cuFileHandleRegister(CUfileHandle_t* fh, CUfileDescr_t* descr) {
  const CUfileError_t st =
      guarded("cuFileHandleRegister", [&] { return State::get().register_handle(fh, descr); });
  Counters& c = State::get().counters();
  State::get().count(c.hdl_reg_ok, c.hdl_reg_err, st.err == CU_FILE_SUCCESS);
  return st;
}

CUFILE_API void cuFileHandleDeregister(CUfileHandle_t fh) {
  // void in cuFile's header: an unknown handle can only be logged.
  const bool known = State::get().deregister_handle(fh);
  if (!known) log(LogLevel::info, "cuFileHandleDeregister: handle {} is not registered", fh);
  Counters& c = State::get().counters();
  State::get().count(c.hdl_dereg_ok, c.hdl_dereg_err, known);
}

CUFILE_API CUfileError_t cuFileBufRegister(const void* bufPtr_base, size_t length, int flags) {
  const CUfileError_t st = guarded("cuFileBufRegister", [&] {
    return State::get().register_buffer(bufPtr_base, length, flags);
  });
  Counters& c = State::get().counters();
  State::get().count(c.buf_reg_ok, c.buf_reg_err, st.err == CU_FILE_SUCCESS);
  return st;
}

CUFILE_API CUfileError_t cuFileBufDeregister(const void* bufPtr_base) {
  const CUfileError_t st = State::get().deregister_buffer(bufPtr_base);
  Counters& c = State::get().counters();
  State::get().count(c.buf_dereg_ok, c.buf_dereg_err, st.err == CU_FILE_SUCCESS);
  return st;
}
