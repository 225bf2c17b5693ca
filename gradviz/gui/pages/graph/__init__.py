"""The Graph page: the model as a layered graph, coloured by its gradients' health."""
