"""Says it is ready, then sleeps until a signal ends it."""
import time

print("ready", flush=True)
time.sleep(120)
