"""The PPO core and the match step: networks, acting, rollout, GAE, losses, the update.

They play and learn whatever the features hand them (a plan, a pool of opponents, the
member's values) and import no feature (``tests/test_import_graph.py``).
"""
