/* C code recording into the Rust program's session through include/tickscope.h. */
#include "tickscope.h"

void native_work(unsigned inner);

void native_work(unsigned inner) {
    static uint32_t outer_site = 0, inner_site = 0;
    unsigned i;
    if (outer_site == 0) {
        outer_site = tickscope_callsite("native outer", __FILE__, __LINE__);
        inner_site = tickscope_callsite("native inner", __FILE__, __LINE__);
    }
    tickscope_scope_begin(outer_site);
    for (i = 0; i < inner; i++) {
        tickscope_scope_begin(inner_site);
        tickscope_scope_end();
    }
    /* An unknown id records nothing, and its end pairs with it. */
    tickscope_scope_begin(0xFFFFFFF0u);
    tickscope_scope_end();
    tickscope_scope_end();
    /* An end with nothing open does nothing. */
    tickscope_scope_end();
}
