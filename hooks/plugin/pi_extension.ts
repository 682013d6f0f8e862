// The Pi extension of a package `git hermit convert --target pi` wrote. Pi runs no shell
// hooks, so this file does at start-up what a deployment's context file asks the agent to do by
// hand: it adds the adapter's policy (context.md, beside this package's package.json) to the
// system prompt and, when the adapter has a hook middleware, runs its session-start hook once
// (the hook runner in adapter/, standard-library Python) and adds what it hands over (the
// long-term memory). A hook that fails or times out adds nothing: the session goes on.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const PYTHON: string = __PYTHON__;
const RUNS_SESSION_START: boolean = __SESSION_START__;
const RUNNER = "import sys;sys.path[0]=sys.argv[1];import hook_runner;hook_runner.main(sys.argv[1:])";
const root = join(dirname(fileURLToPath(import.meta.url)), "..");

function read(path: string): string {
  return existsSync(path) ? readFileSync(path, "utf8").trim() : "";
}

function sessionStart(): string {
  if (!RUNS_SESSION_START) return "";
  try {
    return execFileSync(PYTHON, ["-S", "-c", RUNNER, join(root, "adapter"), "SessionStart"],
      { encoding: "utf8", timeout: 30000, stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return "";
  }
}

export default function (pi: any) {
  const policy = read(join(root, "context.md"));
  let handedOver: string | undefined;
  pi.on("before_agent_start", async (event: any) => {
    if (handedOver === undefined) handedOver = sessionStart();
    const parts = [event.systemPrompt, policy, handedOver].filter((part) => part);
    return { systemPrompt: parts.join("\n\n") };
  });
}
