{
  "targets": [{
    "target_name": "fsafe",
    "sources": ["src/addon.c", "src/write.c", "src/async.c", "src/sweep.c",
                "src/writer.c", "src/pool.c", "src/lock.c", "src/store.c",
                "src/spool.c", "src/inbox.c", "src/checkpoint.c"],
    "cflags": ["-std=c17", "-Wall", "-Wextra",
               "<!@(pkg-config --cflags fsafe)"],
    "libraries": ["<!@(pkg-config --libs fsafe)"]
  }]
}
