"""Task routing: which agent takes a task. Six strategies (`AssignmentStrategy`) behind
one protocol (`base.RoutingStrategy`), and the `TaskRouter` that loads the candidates,
applies a strategy and assigns through the TaskEngine, whose writer checks the agent's
capacity in the transaction that writes the assignment."""
