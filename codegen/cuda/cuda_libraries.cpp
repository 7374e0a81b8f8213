// Loads NVRTC and the CUDA driver with dlopen and resolves the entry points dynvm uses,
// through the function types of their own headers, so a wrong signature cannot compile.
#include "dynvm/codegen/cuda_libraries.h"

#ifdef DYNVM_HAVE_CUDA
#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <mutex>
#include <vector>
#endif

namespace dynvm::codegen {

#ifdef DYNVM_HAVE_CUDA
namespace {

struct NvrtcEntryPoints {
  decltype(&nvrtcVersion) version = nullptr;
  decltype(&nvrtcGetErrorString) error_string = nullptr;
  decltype(&nvrtcCreateProgram) create_program = nullptr;
  decltype(&nvrtcCompileProgram) compile_program = nullptr;
  decltype(&nvrtcGetPTXSize) ptx_size = nullptr;
  decltype(&nvrtcGetPTX) ptx = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcDestroyProgram) destroy_program = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
};

struct DriverEntryPoints {
  decltype(&cuGetErrorString) error_string = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDeviceGetAttribute) attribute = nullptr;
  decltype(&cuDevicePrimaryCtxRetain) primary_retain = nullptr;
  decltype(&cuCtxGetCurrent) ctx_get = nullptr;
  decltype(&cuCtxSetCurrent) ctx_set = nullptr;
  decltype(&cuModuleLoadData) module_load = nullptr;
  decltype(&cuModuleGetFunction) module_function = nullptr;
  decltype(&cuLaunchKernel) launch = nullptr;
  decltype(&cuMemcpyDtoDAsync) copy_async = nullptr;
  decltype(&cuGraphLaunch) graph_launch = nullptr;
};

struct Loaded {
  CudaLibraries report;
  NvrtcEntryPoints nvrtc;
  DriverEntryPoints driver;
};

template <typename F>
bool resolve(void* library, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(library, name));
  return *out != nullptr;
}

std::string last_dlerror() {
  const char* message = dlerror();
  return message != nullptr ? message : "unknown error";
}

// NVRTC of the major version the headers are, first beside those headers (the toolkit's
// lib64, or the lib folder of torch's NVIDIA package), then wherever the loader finds it.
std::vector<std::string> nvrtc_candidates() {
  std::string so = "libnvrtc.so." + std::to_string(CUDA_VERSION / 1000);
  return {std::string(DYNVM_CUDA_ROOT) + "/lib64/" + so,
          std::string(DYNVM_CUDA_ROOT) + "/lib/" + so, so, "libnvrtc.so"};
}

void load_nvrtc(Loaded& loaded) {
  CudaLibraries& r = loaded.report;
  void* library = nullptr;
  std::string first_error;
  for (const std::string& candidate : nvrtc_candidates()) {
    library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) {
      r.nvrtc_path = candidate;
      break;
    }
    if (first_error.empty()) first_error = last_dlerror();
  }
  if (library == nullptr) {
    r.why_not_nvrtc = "NVRTC was not found (" + first_error + ")";
    return;
  }
  NvrtcEntryPoints& e = loaded.nvrtc;
  bool all = resolve(library, "nvrtcVersion", &e.version) &&
             resolve(library, "nvrtcGetErrorString", &e.error_string) &&
             resolve(library, "nvrtcCreateProgram", &e.create_program) &&
             resolve(library, "nvrtcCompileProgram", &e.compile_program) &&
             resolve(library, "nvrtcGetPTXSize", &e.ptx_size) &&
             resolve(library, "nvrtcGetPTX", &e.ptx) &&
             resolve(library, "nvrtcGetProgramLogSize", &e.log_size) &&
             resolve(library, "nvrtcGetProgramLog", &e.log) &&
             resolve(library, "nvrtcDestroyProgram", &e.destroy_program) &&
             resolve(library, "nvrtcGetCUBINSize", &e.cubin_size) &&
             resolve(library, "nvrtcGetCUBIN", &e.cubin);
  if (!all) {
    r.why_not_nvrtc = r.nvrtc_path + " lacks an entry point dynvm uses (" + last_dlerror() + ")";
    return;
  }
  if (e.version(&r.nvrtc_major, &r.nvrtc_minor) != NVRTC_SUCCESS) {
    r.why_not_nvrtc = r.nvrtc_path + " did not report its version";
    return;
  }
  // NVRTC opens its builtins library by name when it compiles; one beside a NVRTC loaded
  // from a folder is loaded first, so that it is found whatever the process's search path
  // (torch's NVIDIA package is on none).
  size_t slash = r.nvrtc_path.rfind('/');
  if (slash != std::string::npos) {
    std::string builtins = r.nvrtc_path.substr(0, slash) + "/libnvrtc-builtins.so." +
                           std::to_string(r.nvrtc_major) + "." + std::to_string(r.nvrtc_minor);
    dlopen(builtins.c_str(), RTLD_NOW | RTLD_GLOBAL);  // if absent, NVRTC says so on compile
  }
  r.nvrtc = true;
}

void load_driver(CudaLibraries& r, DriverEntryPoints& e) {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    r.why_not_driver = "no CUDA driver (" + last_dlerror() + ")";
    return;
  }
  decltype(&cuInit) init = nullptr;
  decltype(&cuDriverGetVersion) driver_version = nullptr;
  decltype(&cuDeviceGetCount) device_count = nullptr;
  if (!resolve(library, "cuInit", &init) ||
      !resolve(library, "cuDriverGetVersion", &driver_version) ||
      !resolve(library, "cuDeviceGetCount", &device_count) ||
      !resolve(library, "cuGetErrorString", &e.error_string) ||
      !resolve(library, "cuDeviceGet", &e.device_get) ||
      !resolve(library, "cuDeviceGetAttribute", &e.attribute) ||
      !resolve(library, "cuDevicePrimaryCtxRetain", &e.primary_retain) ||
      !resolve(library, "cuCtxGetCurrent", &e.ctx_get) ||
      !resolve(library, "cuCtxSetCurrent", &e.ctx_set) ||
      !resolve(library, "cuModuleLoadData", &e.module_load) ||
      !resolve(library, "cuModuleGetFunction", &e.module_function) ||
      !resolve(library, "cuLaunchKernel", &e.launch) ||
      !resolve(library, "cuMemcpyDtoDAsync_v2", &e.copy_async) ||
      !resolve(library, "cuGraphLaunch", &e.graph_launch)) {
    r.why_not_driver = "the CUDA driver lacks an entry point dynvm uses (" + last_dlerror() + ")";
    return;
  }
  driver_version(&r.driver_version);
  CUresult status = init(0);
  if (status != CUDA_SUCCESS) {
    r.why_not_driver = "the CUDA driver did not initialise (error " +
                       std::to_string(static_cast<int>(status)) + "; no GPU visible?)";
    return;
  }
  r.driver = true;
  if (device_count(&r.device_count) != CUDA_SUCCESS || r.device_count == 0) {
    r.device_count = 0;
    r.why_not_driver = "the CUDA driver sees no GPU";
  }
}

const Loaded& loaded() {
  static const Loaded instance = [] {
    Loaded l;
    load_nvrtc(l);
    load_driver(l.report, l.driver);
    return l;
  }();
  return instance;
}

}  // namespace

const CudaLibraries& cuda_libraries() { return loaded().report; }

namespace {

// Compiles `source` for `architecture`; the CUBIN (for a real architecture) or the PTX.
Expected<std::string> nvrtc_compile(const std::string& source, const std::string& name,
                                    const std::string& architecture, bool cubin) {
  const Loaded& l = loaded();
  if (!l.report.nvrtc) return make_error(l.report.why_not_nvrtc);
  const NvrtcEntryPoints& e = l.nvrtc;
  nvrtcProgram program = nullptr;
  nvrtcResult status =
      e.create_program(&program, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (status != NVRTC_SUCCESS) {
    return make_error(std::string("NVRTC could not create a program: ") + e.error_string(status));
  }
  std::string arch_option = "--gpu-architecture=" + architecture;
  const char* options[] = {arch_option.c_str(), "--std=c++17"};
  status = e.compile_program(program, 2, options);
  size_t log_size = 0;
  e.log_size(program, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) e.log(program, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (status != NVRTC_SUCCESS) {
    e.destroy_program(&program);
    return make_error("NVRTC could not compile " + name + " for " + architecture + ": " +
                      e.error_string(status) + (log.empty() ? "" : "\n" + log));
  }
  size_t size = 0;
  std::string image;
  if (cubin) {
    e.cubin_size(program, &size);
    image.assign(size, '\0');
    e.cubin(program, image.data());
  } else {
    e.ptx_size(program, &size);
    image.assign(size, '\0');
    e.ptx(program, image.data());
    while (!image.empty() && image.back() == '\0') image.pop_back();
  }
  e.destroy_program(&program);
  if (image.empty()) {
    return make_error("NVRTC gave no " + std::string(cubin ? "CUBIN" : "PTX") + " for " + name +
                      " (" + architecture + " is not a real architecture?)");
  }
  return image;
}

std::string driver_error(const DriverEntryPoints& e, CUresult status, const char* what) {
  const char* text = nullptr;
  e.error_string(status, &text);
  return std::string(what) + " failed: " +
         (text != nullptr ? text : "error " + std::to_string(static_cast<int>(status)));
}

// The primary context of `device`, retained once per process, made current.
Expected<CUcontext> current_context(const Loaded& l, int device) {
  const DriverEntryPoints& e = l.driver;
  static std::mutex mutex;
  static std::vector<CUcontext> contexts;
  CUcontext context = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (device < 0 || device >= l.report.device_count) {
      return make_error("no CUDA device " + std::to_string(device));
    }
    if (contexts.empty()) contexts.assign(static_cast<size_t>(l.report.device_count), nullptr);
    context = contexts[static_cast<size_t>(device)];
    if (context == nullptr) {
      CUdevice handle = 0;
      CUresult status = e.device_get(&handle, device);
      if (status == CUDA_SUCCESS) status = e.primary_retain(&context, handle);
      if (status != CUDA_SUCCESS)
        return make_error(driver_error(e, status, "cuDevicePrimaryCtxRetain"));
      contexts[static_cast<size_t>(device)] = context;
    }
  }
  CUcontext current = nullptr;
  e.ctx_get(&current);
  if (current != context) {
    CUresult status = e.ctx_set(context);
    if (status != CUDA_SUCCESS) return make_error(driver_error(e, status, "cuCtxSetCurrent"));
  }
  return context;
}

Expected<const Loaded*> usable_driver() {
  const Loaded& l = loaded();
  if (!l.report.driver || l.report.device_count == 0) return make_error(l.report.why_not_driver);
  return &l;
}

// The driver's entry points with the primary context of `device` current, for a call
// that queues work on a stream.
Expected<const DriverEntryPoints*> driver_on(int device) {
  auto l = usable_driver();
  if (!l) return l.error();
  auto context = current_context(**l, device);
  if (!context) return context.error();
  return &(*l)->driver;
}

}  // namespace

Expected<std::string> nvrtc_compile_to_ptx(const std::string& source, const std::string& name,
                                           const std::string& architecture) {
  return nvrtc_compile(source, name, architecture, false);
}

Expected<std::string> nvrtc_compile_to_cubin(const std::string& source, const std::string& name,
                                             const std::string& architecture) {
  return nvrtc_compile(source, name, architecture, true);
}

Expected<CudaDeviceInfo> cuda_device_info(int device) {
  auto l = usable_driver();
  if (!l) return l.error();
  const DriverEntryPoints& e = (*l)->driver;
  if (device < 0 || device >= (*l)->report.device_count) {
    return make_error("no CUDA device " + std::to_string(device));
  }
  CUdevice handle = 0;
  CudaDeviceInfo info;
  CUresult status = e.device_get(&handle, device);
  if (status == CUDA_SUCCESS) {
    status = e.attribute(&info.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle);
  }
  if (status == CUDA_SUCCESS) {
    status = e.attribute(&info.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle);
  }
  if (status == CUDA_SUCCESS) {
    status = e.attribute(&info.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, handle);
  }
  if (status != CUDA_SUCCESS) return make_error(driver_error(e, status, "cuDeviceGetAttribute"));
  return info;
}

Expected<void*> cuda_load_function(int device, const std::string& image, const std::string& name) {
  auto l = usable_driver();
  if (!l) return l.error();
  const DriverEntryPoints& e = (*l)->driver;
  auto context = current_context(**l, device);
  if (!context) return context.error();
  CUmodule module = nullptr;
  CUresult status = e.module_load(&module, image.data());
  if (status != CUDA_SUCCESS) return make_error(driver_error(e, status, "cuModuleLoadData"));
  CUfunction function = nullptr;
  status = e.module_function(&function, module, name.c_str());
  if (status != CUDA_SUCCESS) return make_error(driver_error(e, status, "cuModuleGetFunction"));
  return static_cast<void*>(function);
}

std::string cuda_launch(int device, void* function, int64_t grid, int block, void* stream,
                        void** args) {
  auto driver = driver_on(device);
  if (!driver) return driver.error().message;
  const DriverEntryPoints& e = **driver;
  CUresult status =
      e.launch(static_cast<CUfunction>(function), static_cast<unsigned>(grid), 1, 1,
               static_cast<unsigned>(block), 1, 1, 0, static_cast<CUstream>(stream), args, nullptr);
  return status == CUDA_SUCCESS ? "" : driver_error(e, status, "cuLaunchKernel");
}

std::string cuda_copy_async(int device, void* destination, const void* source, size_t bytes,
                            void* stream) {
  auto driver = driver_on(device);
  if (!driver) return driver.error().message;
  const DriverEntryPoints& e = **driver;
  CUresult status =
      e.copy_async(reinterpret_cast<CUdeviceptr>(destination),
                   reinterpret_cast<CUdeviceptr>(source), bytes, static_cast<CUstream>(stream));
  return status == CUDA_SUCCESS ? "" : driver_error(e, status, "cuMemcpyDtoDAsync");
}

std::string cuda_graph_launch(int device, void* graph_exec, void* stream) {
  auto driver = driver_on(device);
  if (!driver) return driver.error().message;
  const DriverEntryPoints& e = **driver;
  CUresult status =
      e.graph_launch(static_cast<CUgraphExec>(graph_exec), static_cast<CUstream>(stream));
  return status == CUDA_SUCCESS ? "" : driver_error(e, status, "cuGraphLaunch");
}

#else  // no CUDA target in this build

const CudaLibraries& cuda_libraries() {
  static const CudaLibraries none = [] {
    CudaLibraries r;
    r.why_not_nvrtc = "this build has no CUDA target";
    r.why_not_driver = "this build has no CUDA target";
    return r;
  }();
  return none;
}

Expected<std::string> nvrtc_compile_to_ptx(const std::string&, const std::string&,
                                           const std::string&) {
  return make_error("this build has no CUDA target");
}

Expected<std::string> nvrtc_compile_to_cubin(const std::string&, const std::string&,
                                             const std::string&) {
  return make_error("this build has no CUDA target");
}

Expected<CudaDeviceInfo> cuda_device_info(int) {
  return make_error("this build has no CUDA target");
}

Expected<void*> cuda_load_function(int, const std::string&, const std::string&) {
  return make_error("this build has no CUDA target");
}

std::string cuda_launch(int, void*, int64_t, int, void*, void**) {
  return "this build has no CUDA target";
}

std::string cuda_copy_async(int, void*, const void*, size_t, void*) {
  return "this build has no CUDA target";
}

std::string cuda_graph_launch(int, void*, void*) { return "this build has no CUDA target"; }

#endif

}  // namespace dynvm::codegen
