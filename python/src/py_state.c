/* The module's definition and how a type finds the module state (py_internal.h). The lowest
 * layer of the extension: the types call it; its functions and slots are filled in by
 * PyInit__hdmlp (py_module.c), so it calls nothing above it. */
#include "py_internal.h"

PyModuleDef py_module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "hdmlp._hdmlp",
    .m_doc = "C extension of hdmlp (use the hdmlp package).",
    .m_size = sizeof(py_state),
};

py_state *py_state_from_type(PyTypeObject *tp)
{
    PyObject *m = PyType_GetModuleByDef(tp, &py_module_def);
    return m != NULL ? (py_state *)PyModule_GetState(m) : NULL;
}
