"""Cost stage (issue 11): cleaned cost observations, the cost fit, the cost index and the capability-vs-cost frontier."""
