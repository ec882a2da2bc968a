# The torch package directory of MEMWALL_BUILD_PYTHON (memwall's Python
# environment, Note [Python environment] in scripts/install-deps.sh), whose
# wheel ships libtorch: headers under include/, libraries under lib/. Sets
# `out` to it, or to "" when that interpreter has no torch. find_spec
# locates the package without importing it (an import takes seconds).
# Used by the two targets that compile against torch: the PyTorch allocator
# library (src/alloc/torch) and the executor (src/exec).
function(memwall_torch_wheel_dir out)
  set(dir "")
  if(EXISTS ${MEMWALL_BUILD_PYTHON})
    execute_process(
      COMMAND ${MEMWALL_BUILD_PYTHON} -c
              "import importlib.util as u; s = u.find_spec('torch'); print(s.submodule_search_locations[0] if s else '')"
      OUTPUT_VARIABLE dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()
