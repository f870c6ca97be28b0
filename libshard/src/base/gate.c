/*
 * The memory gate (gate.h).
 */
#include "base/gate.h"

void shard_gate_init(ShardGate *g, uint64_t cap)
{
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->room, NULL);
    g->cap = cap;
    g->held = 0;
    g->waits = 0;
}

void shard_gate_enter(ShardGate *g, uint64_t bytes)
{
    pthread_mutex_lock(&g->lock);
    if (g->held && bytes > g->cap - (g->held < g->cap ? g->held : g->cap)) {
        g->waits++;
        while (g->held && bytes > g->cap - (g->held < g->cap ? g->held : g->cap))
            pthread_cond_wait(&g->room, &g->lock);
    }
    g->held += bytes;
    pthread_mutex_unlock(&g->lock);
}

void shard_gate_leave(ShardGate *g, uint64_t bytes)
{
    if (!bytes)
        return;
    pthread_mutex_lock(&g->lock);
    g->held -= bytes;
    pthread_cond_broadcast(&g->room);
    pthread_mutex_unlock(&g->lock);
}

void shard_gate_destroy(ShardGate *g)
{
    pthread_cond_destroy(&g->room);
    pthread_mutex_destroy(&g->lock);
}
