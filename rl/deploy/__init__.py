"""patchgym.rl.deploy: sampler fleets on real servers: SGLang launch arguments and the Modal app.

Modules: `launch` (per group: SGLang server arguments, the weight view it loads, the Modal GPU
type; pure), `modal_app` (the Modal app: one class per group, views volume, router endpoint,
deploy/stop under a creation rate), `router_app` (the router as an HTTP service), `cli`
(`patchgym fleet deploy FLEET --modal`, `patchgym fleet stop FLEET`). Importing this package
imports neither Modal nor torch.
"""
