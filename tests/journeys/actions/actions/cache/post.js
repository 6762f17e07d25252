// actions/cache stand-in, post step: save unless the primary key hit (standin.py cache-post).
const { execFileSync } = require("child_process");
execFileSync(process.env.JOURNEY_PYTHON, [process.env.JOURNEY_STANDINS + "/standin.py", "cache-post"], { stdio: "inherit" });
