# Tests of sweeps, planning, reports and traces.
