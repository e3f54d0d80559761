/* worst.h - worse_of: the largest error so far, for tests: fmax drops a NaN (fmax(e, NaN) is e), so an error
   that is NaN, from a NaN loss or weight, makes the worst error infinite and the check fail */
#ifndef MGT_TEST_WORST_H
#define MGT_TEST_WORST_H
#include <math.h> /* defines: INFINITY */
static inline double worse_of(double so_far, double err) { return err == err ? (err > so_far ? err : so_far) : INFINITY; }
#endif
