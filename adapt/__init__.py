"""Learn when to deepen a model (Net2Net) as a job gets more resources: tables, the REINFORCE policy, its evaluation."""
