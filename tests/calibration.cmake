# Tests of the calibration harness's CPU side: fitting, nccl-tests logs, JSONL resume, validate;
# and, with CUDA, the harness itself (label gpu, skipped without a GPU).
dtsim_test(test_calibrate
  SOURCES calibrate/records_test.cpp calibrate/nccl_tests_log_test.cpp calibrate/lsq_test.cpp calibrate/fit_test.cpp
    calibrate/validate_test.cpp
  DEPS dtsim_calibrate dtsim_config)
dtsim_test(test_calibrate_cli SOURCES calibrate/calibrate_cli_test.cpp DEPS nlohmann_json::nlohmann_json)
target_compile_definitions(test_calibrate_cli PRIVATE DTSIM_BINARY="$<TARGET_FILE:dtsim>")
add_dependencies(test_calibrate_cli dtsim)
