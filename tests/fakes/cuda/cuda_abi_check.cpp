// Compile-time check of src/gpu/cuda_api.hpp against the real cuda.h, built only where the CUDA
// toolkit headers exist. The shim declares the driver's types itself so the library builds
// without the toolkit; a wrong parameter type there would compile and then corrupt the stack on
// a real GPU, which no fake can catch. Here every entry point's signature and every constant is
// compared with the real declaration: same arity, and each parameter the same size and kind
// (integer of the same signedness, enum, pointer to the same kind, function pointer).
#include <cuda.h>

#include <cstddef>
#include <type_traits>

#include "gpu/cuda_api.hpp"

namespace {

template <class A, class B>
struct FnAbi : std::false_type {};

template <class A, class B>
constexpr bool abi_same();

template <class Ra, class... Pa, class Rb, class... Pb>
struct FnAbi<Ra(Pa...), Rb(Pb...)> {
  static constexpr bool params() {
    if constexpr (sizeof...(Pa) != sizeof...(Pb)) {
      return false;
    } else {
      return (abi_same<Pa, Pb>() && ...);
    }
  }
  static constexpr bool value = abi_same<Ra, Rb>() && params();
};

template <class A, class B>
constexpr bool abi_same() {
  if constexpr (std::is_void_v<A> || std::is_void_v<B>) {
    return std::is_same_v<A, B>;  // cv-qualified void counts: const void* vs void*
  } else if constexpr (std::is_pointer_v<A> || std::is_pointer_v<B>) {
    if constexpr (std::is_pointer_v<A> && std::is_pointer_v<B>) {
      using Pa = std::remove_pointer_t<A>;
      using Pb = std::remove_pointer_t<B>;
      return std::is_const_v<Pa> == std::is_const_v<Pb> &&
             abi_same<std::remove_cv_t<Pa>, std::remove_cv_t<Pb>>();
    } else {
      return false;
    }
  } else if constexpr (std::is_function_v<A> || std::is_function_v<B>) {
    return FnAbi<A, B>::value;
  } else if constexpr (std::is_class_v<A> || std::is_class_v<B>) {
    return std::is_class_v<A> && std::is_class_v<B>;  // opaque handles: CUctx_st, ...
  } else if constexpr (std::is_enum_v<A> || std::is_enum_v<B>) {
    constexpr bool a_int = std::is_enum_v<A> || std::is_integral_v<A>;
    constexpr bool b_int = std::is_enum_v<B> || std::is_integral_v<B>;
    return sizeof(A) == sizeof(B) && a_int && b_int;
  } else {
    return std::is_integral_v<A> && std::is_integral_v<B> && sizeof(A) == sizeof(B) &&
           std::is_signed_v<A> == std::is_signed_v<B>;
  }
}

namespace cu = sluice::detail::cu;

#define SLUICE_CHECK_ENTRY(name, params)                                 \
  static_assert(abi_same<std::remove_pointer_t<decltype(cu::Api::name)>, \
                         std::remove_pointer_t<decltype(&::name)>>(),    \
                "cuda_api.hpp: " #name " does not match cuda.h");
SLUICE_CUDA_ENTRY_POINTS(SLUICE_CHECK_ENTRY)
SLUICE_CUDA_OPTIONAL_ENTRY_POINTS(SLUICE_CHECK_ENTRY)
#undef SLUICE_CHECK_ENTRY

static_assert(sizeof(cu::CUdeviceptr) == sizeof(::CUdeviceptr));
static_assert(sizeof(cu::CUresult) == sizeof(::CUresult));
static_assert(cu::success == CUDA_SUCCESS);
static_assert(cu::error_invalid_value == CUDA_ERROR_INVALID_VALUE);
static_assert(cu::error_out_of_memory == CUDA_ERROR_OUT_OF_MEMORY);
static_assert(cu::error_not_initialized == CUDA_ERROR_NOT_INITIALIZED);
static_assert(cu::error_no_device == CUDA_ERROR_NO_DEVICE);
static_assert(cu::error_invalid_device == CUDA_ERROR_INVALID_DEVICE);
static_assert(cu::error_invalid_context == CUDA_ERROR_INVALID_CONTEXT);
static_assert(cu::error_invalid_handle == CUDA_ERROR_INVALID_HANDLE);
static_assert(cu::error_not_found == CUDA_ERROR_NOT_FOUND);
static_assert(cu::error_not_ready == CUDA_ERROR_NOT_READY);
static_assert(cu::error_host_memory_already_registered ==
              CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
static_assert(cu::error_host_memory_not_registered == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
static_assert(cu::error_unknown == CUDA_ERROR_UNKNOWN);
static_assert(cu::pointer_attribute_memory_type == CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
static_assert(cu::memorytype_host == CU_MEMORYTYPE_HOST);
static_assert(cu::memorytype_device == CU_MEMORYTYPE_DEVICE);
static_assert(cu::memhostalloc_portable == CU_MEMHOSTALLOC_PORTABLE);
static_assert(cu::memhostalloc_devicemap == CU_MEMHOSTALLOC_DEVICEMAP);
static_assert(cu::stream_wait_value_geq == CU_STREAM_WAIT_VALUE_GEQ);
static_assert(cu::memhostregister_portable == CU_MEMHOSTREGISTER_PORTABLE);
static_assert(cu::stream_non_blocking == CU_STREAM_NON_BLOCKING);
static_assert(cu::event_disable_timing == CU_EVENT_DISABLE_TIMING);

}  // namespace
