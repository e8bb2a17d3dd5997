#!/bin/sh
# One line per worker, written at once, with what torch would see: the
# multi-node and launcher tests compare these lines rank by rank.
printf '%s RANK=%s LOCAL_RANK=%s NODE_RANK=%s WORLD_SIZE=%s LOCAL_WORLD_SIZE=%s MASTER_ADDR=%s MASTER_PORT=%s\n' \
    "$(hostname)" "${RANK-}" "${LOCAL_RANK-}" "${NODE_RANK-}" "${WORLD_SIZE-}" \
    "${LOCAL_WORLD_SIZE-}" "${MASTER_ADDR-}" "${MASTER_PORT-}"
