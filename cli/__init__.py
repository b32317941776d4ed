"""patchgym: an agentic coding environment and reward service for RL.

The root package holds only the version and the console script (`patchgym.main`). The layers are
subpackages, each in its own top-level folder (see docs/design.md):

    patchgym.scrubber  history scrubbing and its verifier
    patchgym.tasks     task model, loaders, preparation, the bundled suite
    patchgym.harness   sandboxes and grading
    patchgym.env       episodes, tools, the HTTP service and its client
    patchgym.rl        corrections, samplers, trainer, the async loop
"""

__version__ = "0.1.0"
