"""Imports a module from its own directory, as scripts do."""
import sibling_helper

print(sibling_helper.GREETING)
print(sibling_helper.__file__)
