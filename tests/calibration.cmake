# Tests of the calibration harness's CPU side: fitting, nccl-tests logs, JSONL resume, validate.
