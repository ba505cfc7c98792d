"""Policies, batched rollouts, advantage estimators, losses, learners and pools (see DESIGN.md)."""
