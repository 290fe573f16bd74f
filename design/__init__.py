"""Theory engine: error and data use of minibatch MH tests, and their optimal design."""
