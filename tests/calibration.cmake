# Tests of the calibration harness's CPU side: fitting, nccl-tests logs, JSONL resume, validate;
# and, with CUDA, the harness itself (label gpu, skipped without a GPU).
dtsim_test(test_calibrate
  SOURCES calibrate/records_test.cpp calibrate/nccl_tests_log_test.cpp calibrate/lsq_test.cpp calibrate/fit_test.cpp
    calibrate/validate_test.cpp calibrate/deployment_test.cpp calibrate/h100_test.cpp calibrate/h200_test.cpp calibrate/power_plan_test.cpp
  DEPS dtsim_calibrate dtsim_config)
dtsim_test(test_calibrate_cli SOURCES calibrate/calibrate_cli_test.cpp DEPS nlohmann_json::nlohmann_json)
target_compile_definitions(test_calibrate_cli PRIVATE DTSIM_BINARY="$<TARGET_FILE:dtsim>")
add_dependencies(test_calibrate_cli dtsim)

# The GPU harness and the validation workload: --help works anywhere; the measurements are GPU
# tests (label gpu) that exit 77, skipped, where no GPU is present.
if(TARGET dtsim-calibrate)
  add_test(NAME calibrate_help COMMAND dtsim-calibrate --help)
  # tests/gpu_records.sh fails the test when the harness exits 0 without writing a record.
  add_test(NAME calibrate_gpu_overheads
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gpu_records.sh ${CMAKE_CURRENT_BINARY_DIR}/gpu-overheads.jsonl "\"status\":\"ok\",\"suite\":\"overhead\""
      $<TARGET_FILE:dtsim-calibrate> --quick --benchmark_filter=overhead --fresh --out ${CMAKE_CURRENT_BINARY_DIR}/gpu-overheads.jsonl)
  set_tests_properties(calibrate_gpu_overheads PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
endif()
if(TARGET dtsim-validate)
  add_test(NAME validate_workload_help COMMAND dtsim-validate --help)
  add_test(NAME validate_workload_gpu
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gpu_records.sh ${CMAKE_CURRENT_BINARY_DIR}/gpu-validate.jsonl "\"status\":\"ok\",\"suite\":\"train_step\""
      $<TARGET_FILE:dtsim-validate> --quick --models gpt-125m --batches 1 --gpus 1 --steps 2 --fresh --out ${CMAKE_CURRENT_BINARY_DIR}/gpu-validate.jsonl)
  set_tests_properties(validate_workload_gpu PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
endif()
