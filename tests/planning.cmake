# Tests of sweeps, planning, reports and traces.
dtsim_test(test_planning
  SOURCES planning/memory_estimate_test.cpp planning/scaling_test.cpp planning/loaders_test.cpp planning/sweep_runner_test.cpp
    planning/trace_test.cpp planning/plan_test.cpp
  DEPS dtsim_reports dtsim_planning dtsim_config)

# The binary as users run it.
dtsim_test(test_planning_cli SOURCES planning/cli_test.cpp DEPS nlohmann_json::nlohmann_json)
target_compile_definitions(test_planning_cli PRIVATE DTSIM_BINARY="$<TARGET_FILE:dtsim>")
add_dependencies(test_planning_cli dtsim)

# Awkward results and inputs: chart text, fingerprints, measurements, interrupted sweeps.
dtsim_test(test_results_input SOURCES planning/results_input_test.cpp DEPS nlohmann_json::nlohmann_json)
target_compile_definitions(test_results_input PRIVATE DTSIM_BINARY="$<TARGET_FILE:dtsim>")
add_dependencies(test_results_input dtsim)

# Ctrl-C and --resume (seconds of simulations).
dtsim_test(test_planning_resume SOURCES planning/cli_resume_test.cpp DEPS LABELS slow)
target_compile_definitions(test_planning_resume PRIVATE DTSIM_BINARY="$<TARGET_FILE:dtsim>")
add_dependencies(test_planning_resume dtsim)

# report.html in headless Chromium (skipped without Chromium; scripts/deps --test installs it).
find_package(PNG QUIET)
dtsim_test(test_report_render SOURCES planning/report_render_test.cpp DEPS)
target_compile_definitions(test_report_render PRIVATE DTSIM_BINARY="$<TARGET_FILE:dtsim>")
if(PNG_FOUND)
  target_link_libraries(test_report_render PRIVATE PNG::PNG)
  target_compile_definitions(test_report_render PRIVATE DTSIM_HAVE_PNG)
endif()
add_dependencies(test_report_render dtsim)

# mpirun -n 2 against one process (skipped without MPI); slow: not under the sanitizers, where
# OpenMPI's own allocations would be reported.
dtsim_test(test_mpi_sweep SOURCES planning/mpi_test.cpp DEPS LABELS "slow;mpi")
target_compile_definitions(test_mpi_sweep PRIVATE DTSIM_BINARY="$<TARGET_FILE:dtsim>")
if(DTSIM_HAVE_MPI)
  target_compile_definitions(test_mpi_sweep PRIVATE DTSIM_HAVE_MPI)
endif()
add_dependencies(test_mpi_sweep dtsim)

# Every sweep and plan example, and the trace of a large example (seconds).
dtsim_test(test_planning_examples SOURCES planning/examples_test.cpp DEPS LABELS slow)
target_compile_definitions(test_planning_examples PRIVATE DTSIM_BINARY="$<TARGET_FILE:dtsim>")
add_dependencies(test_planning_examples dtsim)
