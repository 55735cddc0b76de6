/*
 * Multiboot entry, GDT and interrupt stubs of the SynIC test guest.
 * 32-bit protected mode, no paging: guest virtual == physical.
 */
    .section .multiboot, "a"
    .align 4
    .long 0x1BADB002
    .long 0
    .long -0x1BADB002

    .text
    .globl _start
_start:
    cli
    mov $stack_top, %esp
    lgdt gdt_desc
    ljmp $0x08, $1f
1:  mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    mov %ax, %fs
    mov %ax, %gs
    call main
2:  cli
    hlt
    jmp 2b

/* one stub per vector: push the vector number, call isr_handler(vector) */
    .macro ISR vec
    .globl isr_\vec
isr_\vec:
    pusha
    push $\vec
    call isr_handler
    add $4, %esp
    popa
    iret
    .endm

    .irp v, 0,1,2,3,4,5,7,8,9,10,11,12,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,80,81,82,83,255
    ISR \v
    .endr

/*
 * #UD and #GP may be expected: the test sets fault_resume to the address after
 * the instruction it expects to fault. The stub then records the vector in
 * fault_vector, clears fault_resume and returns there. An unexpected one (no
 * resume address) goes to isr_handler, which fails the test.
 */
    .macro EXPECTABLE vec, errcode
    .globl isr_\vec
isr_\vec:
    cmpl $0, fault_resume
    je 1f
    .if \errcode
    add $4, %esp                /* the error code */
    .endif
    push %eax
    movl $\vec, fault_vector
    mov fault_resume, %eax
    mov %eax, 4(%esp)           /* the saved EIP */
    movl $0, fault_resume
    pop %eax
    iret
1:  pusha
    push $\vec
    call isr_handler
    add $4, %esp
    popa
    iret
    .endm

    EXPECTABLE 6, 0
    EXPECTABLE 13, 1

    .data
    .align 8
gdt:
    .quad 0
    .quad 0x00CF9A000000FFFF    /* 0x08: flat 32-bit code */
    .quad 0x00CF92000000FFFF    /* 0x10: flat data */
gdt_desc:
    .word gdt_desc - gdt - 1
    .long gdt

    .bss
    .align 16
    .space 16384
stack_top:
