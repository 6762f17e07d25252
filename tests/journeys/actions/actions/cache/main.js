// actions/cache stand-in, main step: restore (tests/journeys/actions/standin.py cache-restore).
const { execFileSync } = require("child_process");
execFileSync(process.env.JOURNEY_PYTHON, [process.env.JOURNEY_STANDINS + "/standin.py", "cache-restore"], { stdio: "inherit" });
