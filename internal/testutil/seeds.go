package testutil

// Seed002FilesystemProbe is Python that checks seed 002's create's filesystem lists inside the
// sandbox: it prints "rw ro False" when /workspace/output is writable, /workspace/data
// read-only and /etc out of reach (the seed's read_write, read_only and blocked).
const Seed002FilesystemProbe = `import os
def w(p):
    try:
        open(p, "w").write("x")
        return "rw"
    except OSError:
        return "ro"
print(w("/workspace/output/f"), w("/workspace/data/f"), os.access("/etc", os.R_OK))`
