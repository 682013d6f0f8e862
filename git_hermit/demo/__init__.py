"""The offline demo's pieces: a bundled benchmark (benchmark.py), a simulated acting agent that
follows the deployed adapter (acting.py), and scripted Agent Debugger / Evolve Agent learners
(learners.py). ``git hermit demo`` wires them into a real ahe run; DEMO_NOTICE says so plainly.
"""

DEMO_NOTICE = """\
This demo is simulated: the acting agent and the learners are scripted programs, not models.
The acting agent really reads the deployed adapter (AGENTS.md, skills, the memory its hooks hand
over) and runs real commands, and everything git hermit records (commits, notes, verdicts,
rollbacks, the best-ever tag) is real; only the "thinking" is scripted. No network, no keys.

To run the same loop with a real agent, change hermit.yaml:

  # Codex CLI (OPENAI_API_KEY or a ChatGPT login)
  host: codex
  agent: {backend: codex, model: gpt-5.6-luna}
  evolver: {name: ahe, base: codex, model: {name: gpt-5.6-luna, effort: medium},
            params: {k: 2, rollback: auto}}

  # Claude Code (ANTHROPIC_API_KEY or a Claude login)
  host: claude-code
  agent: {backend: claude-code, model: claude-sonnet-4-5}
  evolver: {name: ahe, base: claude-code, model: {name: claude-sonnet-4-5},
            params: {k: 2, rollback: auto}}

  # an OpenAI-compatible server on this machine, through Codex
  agent:
    backend: codex
    model: my-local-model
    provider: {base_url: http://127.0.0.1:8000/v1, env_key: LOCAL_API_KEY, wire_api: responses}
"""
