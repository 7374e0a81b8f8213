"""Models the model tests compile: a GPT-2-style block and tiny GPT-2, a text
classifier, and torchvision's image models."""
