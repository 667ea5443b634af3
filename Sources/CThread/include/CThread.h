#ifndef ROUTECTL_CTHREAD_H
#define ROUTECTL_CTHREAD_H
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* gettid(2): the Glibc module shows neither it nor syscall(2), a variadic function Swift cannot call.
 * For a timer that signals this thread only (SIGEV_THREAD_ID), Store's bounded lock wait. */
static inline pid_t routectl_gettid(void) { return (pid_t)syscall(SYS_gettid); }

#endif
